/**
 * Jest reporter: at the end of a run, one line that counts the tests per service, read from the test titles
 * (each suite names its database in its title, and `describeWith()` appends the services it needs), e.g.
 *
 *   services: PostgreSQL 212 passed · MariaDB 150 passed · SQLite 180 passed · RabbitMQ 140 passed · NATS 3 passed …
 *
 * so a CI log shows which services really ran. A service with no test is printed as `0` — a missing service is
 * visible, not silent. Plain JavaScript: Jest loads reporters without its transform.
 */
const SERVICES = [
  ['PostgreSQL', /\bPostgreSQL\b/i],
  ['MariaDB', /\bMariaDB\b|\bMySQL\b/i],
  ['SQLite', /\bSQLite\b/i],
  ['RabbitMQ', /\bRabbitMQ\b/i],
  ['NATS', /\bNATS\b/],
  ['MQTT', /\bMQTT\b/],
  ['Redis', /\bRedis\b/],
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
