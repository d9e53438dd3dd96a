/**
 * `nestjs-outbox/console`: a web page and JSON API to watch every outbox's backlog and lag and to requeue or purge
 * dead letters (docs/console.md). An entry of its own, so an app that does not mount it never loads it.
 *
 * ```ts
 * import { OutboxConsoleModule } from 'nestjs-outbox/console';
 *
 * OutboxConsoleModule.forRoot({ path: 'ops/outbox', guard: OperatorGuard })
 * ```
 *
 * Without a `guard` (and without `allowUnguarded: true`) `forRoot()` throws an `OutboxConfigurationError` of
 * `code` `'OUTBOX_CONSOLE_UNGUARDED'` at startup.
 */

// ── Module: mount the console, with what `forRoot()` takes ───────────────────────────────────────────────────
export { OutboxConsoleModule } from './outbox-console.module';
export type { OutboxConsoleOptions } from './console.options';
