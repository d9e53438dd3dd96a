import { isObservable, lastValueFrom } from 'rxjs';
import { OutboxConfigurationError } from '../errors';
import { contextSlot } from '../util/context-slots';
import { GuardedCall, UNGUARDED_MESSAGE, UNKEYED_REQUEST } from './guarded-call';
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

/**
 * `method` that marks the start of its call before it runs; its name, length and reflect metadata are carried over.
 * Called by Nest on the guarded path (`guarded-path.ts`), its hidden last argument is the guard's call: the body then
 * runs through it, without that argument.
 */
export function markingStart<F extends (...args: any[]) => unknown>(method: F): F {
  const marked = function (this: unknown, ...args: unknown[]) {
    const last = args[args.length - 1];
    if (last instanceof GuardedCall) {
      args.length -= 1;
      return last.run(async () => {
        markStarted();
        return settledValue(method.apply(this, args));
      });
    }
    if (last === UNKEYED_REQUEST) args.length -= 1;
    else if (last === UNGUARDED_MESSAGE) throw unguarded(method);
    markStarted();
    return method.apply(this, args);
  };
  Object.defineProperty(marked, 'name', { value: method.name });
  Object.defineProperty(marked, 'length', { value: method.length });
  for (const key of Reflect.getMetadataKeys(method)) {
    Reflect.defineMetadata(key, Reflect.getMetadata(key, method), marked);
  }
  return marked as unknown as F;
}

/** Marks the call running in this async context as started (its handler's own body was entered). */
function markStarted(): void {
  const mark = starts.get();
  if (mark) mark.started = true;
}

/** A handler's value: a returned Observable's last value (what Nest would send), else the value itself. */
function settledValue(value: unknown): unknown {
  return isObservable(value) ? lastValueFrom(value, { defaultValue: undefined }) : value;
}

function unguarded(method: Function): OutboxConfigurationError {
  return new OutboxConfigurationError(
    `@Idempotent() could not guard ${method.name}: its transport passed neither a context object nor object data to ` +
      'key the message by, so it was not run. Give the handler object data, or use a transport of @nestjs/microservices.',
  );
}
