import type * as OpenTelemetry from '@opentelemetry/api';

/**
 * Optional OpenTelemetry support. `@opentelemetry/api` is an optional peer: it is loaded once, at startup
 * (`loadOpenTelemetry()`, awaited by `OutboxModule` and by `OutboxTraceInterceptor`), and when it is missing
 * every helper here does nothing. The API itself is a no-op until the app registers an SDK, a context manager
 * and a propagator (e.g. `NodeSDK.start()`), so nothing is written unless the app traces.
 */
type Api = typeof OpenTelemetry;

let api: Api | null | undefined;
let loading: Promise<Api | null> | undefined;

/** Loads `@opentelemetry/api` if the app has it installed; resolves with it, or `null` when it is absent. */
export function loadOpenTelemetry(): Promise<Api | null> {
  loading ??= import('@opentelemetry/api').then(
    (loaded) => {
      const module = loaded as unknown as Api & { default?: Api };
      return (api = module.propagation ? module : (module.default ?? null));
    },
    () => (api = null),
  );
  return loading;
}

/** The loaded API (`undefined` before `loadOpenTelemetry()` settled, `null` when it is not installed). */
export function openTelemetry(): Api | null | undefined {
  return api;
}

/**
 * The trace context active now, as propagation headers (W3C `traceparent` / `tracestate` with the default
 * propagator), or `undefined` when nothing is being traced. Stored in the outbox row's headers by `emit()`.
 */
export function currentTraceHeaders(): Record<string, string> | undefined {
  if (!api) return undefined;
  const active = api.context.active();
  if (!api.trace.getSpanContext(active)) return undefined;
  const carrier: Record<string, string> = {};
  api.propagation.inject(active, carrier);
  return Object.keys(carrier).length > 0 ? carrier : undefined;
}
