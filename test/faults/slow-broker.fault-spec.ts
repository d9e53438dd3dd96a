/**
 * Fault 10: a slow broker. Every chunk between the publisher and RabbitMQ is delayed 1.5 s each way by a proxy the
 * scenario owns, so each publisher confirm takes about 3 s against a `publishTimeout` of 2 s. It once made the relay
 * republish every message about 9 times and then declare most of them dead although each had arrived. A late
 * confirm now counts: every message sent, none dead, no attempt spent, at most one extra delivery each.
 */
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from '../helpers/databases';
import { describeWith } from '../helpers/services';
import { runSlowBroker } from '../helpers/slow-broker';
import { CapturingLogger } from './support/log-capture';
import { recordFaultRun } from './support/report';

const SCENARIO = '10 slow broker (confirms at 1.5 × publishTimeout)';
const EVENTS = 2_000;

describeWith(['postgres', 'rabbitmq'], `Fault ${SCENARIO}: ${DATABASE_LABEL.postgres} → RabbitMQ`, () => {
  let db: TestDatabase;
  beforeAll(async () => {
    db = await createTestDatabase('postgres');
  });
  afterAll(async () => {
    await db?.drop();
  });

  it('marks every message sent, none dead, with at most one extra delivery per message', async () => {
    const logger = new CapturingLogger();
    const figures = await runSlowBroker({
      db,
      transport: 'rmq',
      events: EVENTS,
      publishTimeout: 2_000,
      delayMs: 1_500,
      logger,
    });
    recordFaultRun({
      scenario: SCENARIO,
      variant: `${DATABASE_LABEL.postgres} → RabbitMQ`,
      events: figures.events,
      lost: figures.lost,
      duplicatePublishes: figures.duplicates,
    });
    console.log(`slow broker: ${JSON.stringify(figures)}`);

    expect(figures).toMatchObject({ lost: 0, dead: 0, sent: figures.events, maxAttempts: 1 });
    expect(figures.maxDeliveriesOfOne).toBeLessThanOrEqual(2);
  });
});
