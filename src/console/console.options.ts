import type { CanActivate, Type } from '@nestjs/common';

/**
 * Options of `OutboxConsoleModule.forRoot()`: where the console is mounted, who may use it, and what its chart keeps.
 *
 * ```ts
 * OutboxConsoleModule.forRoot({ path: 'ops/outbox', guard: OperatorGuard })
 * ```
 */
export interface OutboxConsoleOptions {
  /**
   * URL path of the page; its JSON API lives under `<path>/api/`. Segments of letters, digits, `-`, `_` and `.`,
   * separated by `/` (leading and trailing slashes are dropped). An app's global prefix applies in front of it.
   * @default 'outbox-console'
   */
  path?: string;
  /**
   * Who may use the console: a `CanActivate` class (resolved by Nest, so it may inject services) or instance,
   * applied to every console route — the page, its script and stylesheet, and the API. Required unless
   * `allowUnguarded` is `true`: the console can requeue and purge messages.
   */
  guard?: Type<CanActivate> | CanActivate;
  /**
   * Mount the console without a guard. Only when something in front of the app (a VPN, an authenticating proxy)
   * already restricts the path; a warning is logged at startup.
   * @default false
   */
  allowUnguarded?: boolean;
  /**
   * How often the chart's sampler reads each outbox's `OutboxService.stats()`, in milliseconds (one query per
   * outbox and sample, whatever the number of open pages). From 250 to 60 000.
   * @default 5000
   */
  sampleInterval?: number;
  /**
   * How many minutes of samples are kept in memory (a ring buffer of `window × 60 000 / sampleInterval` entries),
   * and so the longest span `GET <path>/api/series` and the chart can show. From 1 to 1440.
   * @default 15
   */
  window?: number;
  /**
   * Show the stored response body and headers of an idempotency record in the key lookup (`GET <path>/api/keys`),
   * redacted of credentials. Off by default: a stored response can carry customer data the operator need not see;
   * the lookup then shows scope, state, response status and times only.
   * @default false
   */
  showStoredResponses?: boolean;
}

/** The options with their defaults applied; `guard` stays undefined only when `allowUnguarded` is true. */
export interface ResolvedOutboxConsoleOptions {
  path: string;
  guard: Type<CanActivate> | CanActivate | undefined;
  allowUnguarded: boolean;
  sampleInterval: number;
  window: number;
  showStoredResponses: boolean;
}

/** The defaults of the options that have one. */
export const DEFAULT_CONSOLE_OPTIONS = Object.freeze({
  path: 'outbox-console',
  allowUnguarded: false,
  sampleInterval: 5000,
  window: 15,
  showStoredResponses: false,
});
