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
import { OutboxService } from '../outbox/outbox.service';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { TwiceDeliveringOutboxPublisher } from './twice-delivering.publisher';

export { TwiceDeliveringOutboxPublisher } from './twice-delivering.publisher';

/** Options of `flushOutbox()`. */
export interface FlushOutboxOptions {
  /** Most milliseconds to wait for batches the publisher's own loop has in flight. @default 10000 */
  timeout?: number;
}

/**
 * Publishes every due outbox message now and resolves with the number this call published, so a test can assert
 * on what consumers received without waiting for the publisher's poll. When the app's publisher is enabled its own
 * loop may already hold some rows in flight: `flushOutbox()` also waits until no claimed row is left (up to
 * `timeout`), so every message due when it was called has been handed to the broker when it resolves. For exact
 * counts, set `publisher: { enabled: false }` in tests: then only `flushOutbox()` publishes.
 */
export async function flushOutbox(app: INestApplicationContext, options: FlushOutboxOptions = {}): Promise<number> {
  const publisher = app.get(OutboxPublisher, { strict: false });
  const outbox = app.get(OutboxService, { strict: false });
  const deadline = Date.now() + (options.timeout ?? 10_000);
  let total = await publisher.flush();
  for (;;) {
    const { inFlight, due } = await outbox.stats();
    if (inFlight === 0 && due === 0) return total;
    if (Date.now() > deadline) {
      throw new Error(
        `flushOutbox(): ${inFlight} message(s) still in flight and ${due} due after ${options.timeout ?? 10_000} ms.`,
      );
    }
    if (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    total += await publisher.flush();
  }
}

/**
 * Makes the app's outbox publish every message twice (same message id), so the app's tests prove that its
 * consumers are idempotent: whatever they do must show the effect of one delivery. Pass the builder returned by
 * `Test.createTestingModule()`; it replaces `OutboxPublisher` with `TwiceDeliveringOutboxPublisher`.
 */
export function deliverEveryMessageTwice(builder: TestingModuleBuilder): TestingModuleBuilder {
  return builder.overrideProvider(OutboxPublisher).useClass(TwiceDeliveringOutboxPublisher);
}

export {
  assertIdempotencyContract,
  checkIdempotencyContract,
  describeIdempotencyContract,
  formatContractFailures,
} from './idempotency-contract/idempotency-contract';
export { IDEMPOTENCY_CONTRACT_CHECKS } from './idempotency-contract/idempotency-contract.options';
export type {
  IdempotencyContractCheck,
  IdempotencyContractCheckResult,
  IdempotencyContractFailure,
  IdempotencyContractOptions,
  IdempotencyContractReport,
  IdempotencyContractRequest,
} from './idempotency-contract/idempotency-contract.options';
