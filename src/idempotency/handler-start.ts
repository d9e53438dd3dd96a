import { contextSlot } from '../util/context-slots';
import type { StepScope } from './steps/step-scope';

/**
 * Whether the handler's own body began to run. Nest calls an interceptor's `next.handle()` before the pipes, so a
 * `ValidationPipe` 400 reaches the interceptor like an error of the handler; only a handler that started has an
 * outcome to keep. `@Idempotent()` wraps the methods it guards so that they mark their start here.
 */

/** The mark of one call: set to true when the handler's body is entered. */
export interface HandlerStart {
  started: boolean;
  /** The call's steps (`idempotentStep()`), created on first use; undefined once the handler settled. */
  steps?: () => StepScope | undefined;
  /** The call's idempotency record while its handler runs: the cause of the messages it emits (`trace()`). */
  cause?: CallCause;
}

/** The idempotency record of a running call: the outbox's DataSource it is recorded in, its scope and key. */
export interface CallCause {
  /** The DataSource's name (`'default'` for the default one): only that outbox records the cause. */
  dataSource: string;
  scope: string;
  key: string;
}

/** The start mark, in the library's one async context (`context-slots.ts`). */
const starts = contextSlot<HandlerStart>('idempotent handler start');

/** Runs `work` (which calls the handler) with `mark` as the call's start mark. */
export function trackHandlerStart<T>(mark: HandlerStart, work: () => T): T {
  return starts.run(mark, work);
}

/** The mark of the call running in this async context, if any. */
export function currentHandlerStart(): HandlerStart | undefined {
  return starts.get();
}

/** `method` that marks the start of its call before it runs; its name, length and reflect metadata are carried over. */
export function markingStart<F extends (...args: any[]) => unknown>(method: F): F {
  const marked = function (this: unknown, ...args: unknown[]) {
    const mark = starts.get();
    if (mark) mark.started = true;
    return method.apply(this, args);
  };
  Object.defineProperty(marked, 'name', { value: method.name });
  Object.defineProperty(marked, 'length', { value: method.length });
  for (const key of Reflect.getMetadataKeys(method)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, method), marked);
  }
  return marked as unknown as F;
}

/** The record (scope, key) of the idempotent call running in this async context, when it is one of `dataSource`'s. */
export function currentCause(dataSource: string): { scope: string; key: string } | undefined {
  const cause = starts.get()?.cause;
  return cause && cause.dataSource === dataSource ? { scope: cause.scope, key: cause.key } : undefined;
}
