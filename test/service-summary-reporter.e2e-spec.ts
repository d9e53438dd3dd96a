/**
 * The CI log's last line counts the tests per service from their titles (test/helpers/service-summary-reporter.js).
 * No service needed: the reporter is fed results as Jest would feed them.
 */
// eslint-disable-next-line @typescript-eslint/no-require-imports
const ServiceSummaryReporter = require('./helpers/service-summary-reporter.js');

const result = (ancestorTitles: string[], title: string, status: string) => ({ ancestorTitles, title, status });

describe('service summary reporter (the CI log names the services that ran)', () => {
  it('counts passed, failed and skipped tests per service named in the titles; a service with none is 0', () => {
    const reporter = new ServiceSummaryReporter();
    reporter.onTestResult(
      {},
      {
        testResults: [
          result(['Publisher → RabbitMQ (RMQ transport) on PostgreSQL [PostgreSQL, RabbitMQ]'], 'publishes', 'passed'),
          result(['Publisher → RabbitMQ (RMQ transport) on PostgreSQL [PostgreSQL, RabbitMQ]'], 'retries', 'failed'),
          result(['OutboxService.transaction() on SQLite (better-sqlite3)'], 'commits', 'passed'),
          result(['Outbox migration on MariaDB [MariaDB] [SKIPPED: mariadb not reachable]'], 'needs mariadb', 'passed'),
          result(
            ['Message id round trip over NATS (outbox on SQLite (better-sqlite3)) [NATS]'],
            'round trip',
            'pending',
          ),
          // A title that only mentions services (a unit test) counts for none of them.
          result(['transports (unit)'], 'NATS headers, Redis envelopes and RabbitMQ properties', 'passed'),
        ],
      },
    );
    const write = jest.spyOn(process.stdout, 'write').mockImplementation(() => true);
    try {
      reporter.onRunComplete();
      expect(write).toHaveBeenCalledWith(
        '\nservices: PostgreSQL 1 passed (1 failed) · MariaDB 0 passed (1 skipped) · SQLite 1 passed (1 skipped) · ' +
          'RabbitMQ 1 passed (1 failed) · NATS 0 passed (1 skipped) · MQTT 0 passed · Redis 0 passed\n',
      );
    } finally {
      write.mockRestore();
    }
  });
});
