/**
 * Jest reporter: at the end of a run, one line that counts the tests per service, read from the test titles:
 * `describeWith()` ends a suite's title with the services it needs (`… [PostgreSQL, RabbitMQ]`), and only that list
 * counts — a unit test whose title merely mentions NATS did not use a NATS server. SQLite, in process and not a
 * service, is counted where a title names it. For example:
 *
 *   services: PostgreSQL 122 passed · MariaDB 76 passed (1 failed) · SQLite 137 passed · … · Redis 3 passed
 *
 * so a CI log shows which services really ran. A service with no test is printed as `0` — a missing service is
 * visible, not silent. Plain JavaScript: Jest loads reporters without its transform.
 */
/** `[A, B, …]` as `describeWith()` writes it, holding `name`. */
const inServiceList = (name) => new RegExp(`\\[(?:[^\\]]*, )?${name}(?:, [^\\]]*)?\\]`);

const SERVICES = [
  ['PostgreSQL', inServiceList('PostgreSQL')],
  ['MariaDB', inServiceList('MariaDB')],
  ['SQLite', /\bSQLite\b/i],
  ['RabbitMQ', inServiceList('RabbitMQ')],
  ['NATS', inServiceList('NATS')],
  ['MQTT', inServiceList('MQTT')],
  ['Redis', inServiceList('Redis')],
];

class ServiceSummaryReporter {
  constructor() {
    this.counts = new Map(SERVICES.map(([name]) => [name, { passed: 0, failed: 0, skipped: 0 }]));
  }

  onTestResult(_test, result) {
    for (const test of result.testResults) {
      const title = [...test.ancestorTitles, test.title].join(' › ');
      const outcome = test.status === 'passed' ? 'passed' : test.status === 'failed' ? 'failed' : 'skipped';
      const skippedSuite = /\[SKIPPED: /.test(title);
      for (const [name, pattern] of SERVICES) {
        if (pattern.test(title)) this.counts.get(name)[skippedSuite ? 'skipped' : outcome] += 1;
      }
    }
  }

  onRunComplete() {
    const parts = SERVICES.map(([name]) => {
      const { passed, failed, skipped } = this.counts.get(name);
      const extra = [failed && `${failed} failed`, skipped && `${skipped} skipped`].filter(Boolean).join(', ');
      return `${name} ${passed} passed${extra ? ` (${extra})` : ''}`;
    });
    process.stdout.write(`\nservices: ${parts.join(' · ')}\n`);
  }
}

module.exports = ServiceSummaryReporter;
