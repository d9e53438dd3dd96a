/**
 * `nestjs-outbox/testing`: helpers for an app's own tests.
 *
 * ```ts
 * import { deliverEveryMessageTwice, flushOutbox } from 'nestjs-outbox/testing';
 *
 * const moduleRef = await deliverEveryMessageTwice(Test.createTestingModule({ imports: [AppModule] })).compile();
 * // … act, then publish what the act wrote, now:
 * await flushOutbox(app);
 * ```
 */
import type { INestApplicationContext } from '@nestjs/common';
import type { TestingModuleBuilder } from '@nestjs/testing';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { TwiceDeliveringOutboxPublisher } from './twice-delivering.publisher';

export { TwiceDeliveringOutboxPublisher } from './twice-delivering.publisher';

/**
 * Publishes every due outbox message now (passes until none is due) and resolves with the number published, so a
 * test can assert on what consumers received without waiting for the publisher's poll. Works with the publisher
 * enabled or disabled (`publisher: { enabled: false }` makes the test the only one that publishes).
 */
export function flushOutbox(app: INestApplicationContext): Promise<number> {
  return app.get(OutboxPublisher, { strict: false }).flush();
}

/**
 * Makes the app's outbox publish every message twice (same message id), so the app's tests prove that its
 * consumers are idempotent: whatever they do must show the effect of one delivery. Pass the builder returned by
 * `Test.createTestingModule()`; it replaces `OutboxPublisher` with `TwiceDeliveringOutboxPublisher`.
 */
export function deliverEveryMessageTwice(builder: TestingModuleBuilder): TestingModuleBuilder {
  return builder.overrideProvider(OutboxPublisher).useClass(TwiceDeliveringOutboxPublisher);
}
