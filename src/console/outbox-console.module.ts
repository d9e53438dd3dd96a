import { DynamicModule, Logger, Module } from '@nestjs/common';
import { DiscoveryModule } from '@nestjs/core';
import { OUTBOX_CONSOLE_OPTIONS } from './console.constants';
import type { OutboxConsoleOptions } from './console.options';
import { resolveConsoleOptions } from './console.options-validation';
import { createConsoleController } from './console.controller';
import { ConsoleSampler } from './console-sampler';
import { ConsoleOutboxes } from './console-outboxes';

/**
 * The outbox console: a page and its JSON API, mounted under `path` (default `outbox-console`), that shows every
 * outbox of the app (one per DataSource; `?outbox=<name>` picks one, the default DataSource's without it): the
 * backlog, the relay's lag and throughput over the last minutes, the dead letters by failure group and with filters,
 * the pending and in-flight messages, an idempotency key's records, one message's payload, headers and attempt
 * history (credentials redacted), and requeues or purges dead messages (by ids, filter or failure group).
 *
 * ```ts
 * @Module({
 *   imports: [
 *     OutboxModule.forRoot({ client: 'BROKER', isGlobal: true }),
 *     OutboxConsoleModule.forRoot({ path: 'ops/outbox', guard: OperatorGuard }),
 *   ],
 * })
 * ```
 *
 * Finds the app's outboxes (each `OutboxModule` import) wherever they are imported; `isGlobal` is not needed.
 * Refused at startup (`OutboxConsoleUnguardedError`) without a `guard`, unless `allowUnguarded: true`. See
 * docs/console.md.
 */
@Module({})
export class OutboxConsoleModule {
  static forRoot(options: OutboxConsoleOptions): DynamicModule {
    const resolved = resolveConsoleOptions(options);
    if (!resolved.guard) {
      new Logger('OutboxConsole').warn(
        `The outbox console at /${resolved.path} is mounted WITHOUT a guard (allowUnguarded: true): anyone who ` +
          'reaches this path can read messages and requeue or purge them.',
      );
    }
    return {
      module: OutboxConsoleModule,
      imports: [DiscoveryModule],
      controllers: [createConsoleController(resolved)],
      providers: [{ provide: OUTBOX_CONSOLE_OPTIONS, useValue: resolved }, ConsoleOutboxes, ConsoleSampler],
    };
  }
}
