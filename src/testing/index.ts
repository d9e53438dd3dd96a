/**
 * `nestjs-outbox/testing`: helpers for an app's own tests.
 *
 * ```ts
 * import { deliverEveryMessageTwice, flushOutbox } from 'nestjs-outbox/testing';
 *
 * const moduleRef = await deliverEveryMessageTwice(Test.createTestingModule({ imports: [AppModule] })).compile();
 * // … act, then publish what the act wrote, now:
 * await flushOutbox(app);
 * await flushOutbox(app, { outbox: 'billing' }); // the outbox of the DataSource 'billing', in an app with several
 * await flushEveryOutbox(app); // or all of them
 * ```
 */
import type { INestApplicationContext, Type } from '@nestjs/common';
import { DiscoveryService } from '@nestjs/core';
import type { TestingModuleBuilder } from '@nestjs/testing';
import { OutboxConfigurationError } from '../errors';
import { getOutboxToken, isDefaultDataSource } from '../outbox.constants';
import { findOutboxes } from '../outbox/outbox-directory';
import { OUTBOX_PROVIDERS } from '../outbox.providers';
import { OutboxService } from '../outbox/outbox.service';
import { OutboxPublisher } from '../publisher/outbox-publisher';
import { namedOutboxTokens, withInjectedTokens } from '../util/named-providers';
import { TwiceDeliveringOutboxPublisher } from './twice-delivering.publisher';

// ── Flushing: publish what a test wrote, now ─────────────────────────────────────────────────────────────────

/** Options of `flushOutbox()`. */
export interface FlushOutboxOptions {
  /** Most milliseconds to wait for batches the publisher's own loop has in flight. @default 10000 */
  timeout?: number;
  /**
   * Which outbox to flush, by its DataSource's name (`OutboxModule.forRoot({ dataSource })`), in an app with
   * several (`flushEveryOutbox()` flushes them all).
   * @default 'default' (the default DataSource's outbox)
   */
  outbox?: string;
}

/** Options of `deliverEveryMessageTwice()` (reachable as `Parameters<typeof deliverEveryMessageTwice>[1]`). */
interface DeliverEveryMessageTwiceOptions {
  /**
   * Which outbox delivers twice, by its DataSource's name, in an app with several (call it once per outbox to
   * double several).
   * @default 'default' (the default DataSource's outbox)
   */
  outbox?: string;
}

/**
 * Publishes every due outbox message now and resolves with the number this call published, so a test can assert
 * on what consumers received without waiting for the publisher's poll. When the app's publisher is enabled its own
 * loop may already hold some rows in flight: `flushOutbox()` also waits until no claimed row is left (up to
 * `timeout`), so every message due when it was called has been handed to the broker when it resolves. For exact
 * counts, set `publisher: { enabled: false }` in tests: then only `flushOutbox()` publishes. With several outboxes,
 * `outbox` names the one to flush; an unknown name throws `OutboxConfigurationError` naming those there are.
 */
export function flushOutbox(app: INestApplicationContext, options: FlushOutboxOptions = {}): Promise<number> {
  return flushOne(app, options.outbox ?? 'default', options.timeout ?? 10_000);
}

/**
 * `flushOutbox()` of every outbox of the app (one per `OutboxModule` import), one after the other, the default
 * DataSource's first; resolves with the number published in all.
 */
export async function flushEveryOutbox(
  app: INestApplicationContext,
  options: Omit<FlushOutboxOptions, 'outbox'> = {},
): Promise<number> {
  let total = 0;
  for (const name of outboxesOf(app).keys()) total += await flushOne(app, name, options.timeout ?? 10_000);
  return total;
}

async function flushOne(app: INestApplicationContext, name: string, timeout: number): Promise<number> {
  const publisher = outboxProvider(app, OutboxPublisher, name);
  const outbox = outboxProvider(app, OutboxService, name);
  const deadline = Date.now() + timeout;
  let total = await publisher.flush();
  for (;;) {
    const { inFlight, due } = await outbox.stats();
    if (inFlight === 0 && due === 0) return total;
    if (Date.now() > deadline) {
      const which = isDefaultDataSource(name) ? '' : ` of the outbox '${name}'`;
      throw new Error(
        `flushOutbox(): ${inFlight} message(s)${which} still in flight and ${due} due after ${timeout} ms.`,
      );
    }
    if (inFlight > 0) await new Promise((resolve) => setTimeout(resolve, 10));
    total += await publisher.flush();
  }
}

/** The outboxes of the app by DataSource name (empty when DiscoveryService cannot be had). */
function outboxesOf(app: INestApplicationContext): Map<string, OutboxService> {
  try {
    return findOutboxes(app.get(DiscoveryService, { strict: false }));
  } catch {
    return new Map();
  }
}

/** A provider of the outbox of DataSource `name`; an unknown name fails naming the outboxes the app has. */
function outboxProvider<T>(app: INestApplicationContext, type: Type<T>, name: string): T {
  try {
    return app.get<T>(getOutboxToken(type, name), { strict: false });
  } catch {
    const names = [...outboxesOf(app).keys()];
    throw new OutboxConfigurationError(
      `This app has no outbox of the DataSource '${name}'` +
        (names.length > 0 ? `; its outboxes: ${names.join(', ')}.` : ': import OutboxModule.forRoot() in it.') +
        ' Pass one of those names as `outbox` (the DataSource name given to OutboxModule.forRoot()).',
    );
  }
}

// ── Duplicates: prove the app's consumers idempotent ────────────────────────────────────────────────────────

/**
 * Makes the app's outbox publish every message twice (same message id), so the app's tests prove that its
 * consumers are idempotent: whatever they do must show the effect of one delivery. Pass the builder returned by
 * `Test.createTestingModule()`; it replaces that outbox's `OutboxPublisher` with a publisher that delivers twice.
 * `outbox` names the outbox of a named DataSource; call it once per outbox to double several.
 */
export function deliverEveryMessageTwice(
  builder: TestingModuleBuilder,
  options: DeliverEveryMessageTwiceOptions = {},
): TestingModuleBuilder {
  const name = options.outbox ?? 'default';
  if (isDefaultDataSource(name)) {
    return builder.overrideProvider(OutboxPublisher).useClass(TwiceDeliveringOutboxPublisher);
  }
  // A named outbox's publisher takes that outbox's own providers (its database, handlers, idempotency service).
  const twice = withInjectedTokens(
    TwiceDeliveringOutboxPublisher,
    namedOutboxTokens(OUTBOX_PROVIDERS, name),
    `TwiceDeliveringOutboxPublisher(${name})`,
  );
  return builder.overrideProvider(getOutboxToken(OutboxPublisher, name)).useClass(twice);
}

// ── The idempotency contract: check an app's own `@Idempotent()` routes (options and report by name) ─────────
export {
  assertIdempotencyContract,
  checkIdempotencyContract,
  describeIdempotencyContract,
} from './idempotency-contract/idempotency-contract';
export { IDEMPOTENCY_CONTRACT_CHECKS } from './idempotency-contract/idempotency-contract.options';
export type {
  IdempotencyContractOptions,
  IdempotencyContractReport,
} from './idempotency-contract/idempotency-contract.options';
