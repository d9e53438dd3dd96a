import type { ExecutionContext } from '@nestjs/common';
import { callHolder } from './call-holder';
import type { HandlerBody } from './idempotent-call.types';

/**
 * One call on the guarded path of `@Idempotent()` (see `guarded-path.ts`): what `IdempotentHandlerGuard` learnt
 * before the pipes ran — a request's checked key, a message's id — handed to the handler's wrapper as a hidden last
 * argument. The wrapper removes it and runs the handler's body through `run`.
 */
export class GuardedCall {
  constructor(
    /** The guard's execution context (the handler, its class, the request or the message). */
    readonly context: ExecutionContext,
    /** The guard's step that takes it from there (`handleRequest`, `handleMessage`), bound to what the guard read. */
    private readonly guard: (body: HandlerBody) => Promise<unknown>,
  ) {}

  /** Runs `body` (the handler's own body) guarded by the key; resolves with what the caller receives. */
  run(body: HandlerBody): Promise<unknown> {
    return this.guard(body);
  }
}

/**
 * The hidden argument of a request the guard let through unguarded — a safe method (GET, HEAD, OPTIONS), or no key
 * where none is required: the wrapper runs the handler as it is, as the interceptor's `next.handle()` would.
 */
export const UNKEYED_REQUEST = Symbol('request without an idempotency key');

/**
 * The hidden argument when no guard saw the message (its transport passed neither a context object nor object
 * data to key it by): the wrapper refuses to run the handler unguarded.
 */
export const UNGUARDED_MESSAGE = Symbol('message not seen by IdempotentHandlerGuard');

/**
 * Calls left by the guard, per request (HTTP) or transport context (else data object; messages): one message can
 * reach several handlers (two `@EventPattern`s of one pattern share its transport context), so each call is taken
 * by its handler.
 */
const calls = new WeakMap<object, GuardedCall[]>();

export function leaveGuardedCall(holder: object, call: GuardedCall): void {
  const left = calls.get(holder);
  if (left) left.push(call);
  else calls.set(holder, [call]);
}

/** Takes the call the guard left for the handler of `context`; undefined when the guard left none. */
export function takeGuardedCall(context: ExecutionContext): GuardedCall | undefined {
  const found = findGuardedCall(context);
  if (!found) return undefined;
  const { left, index, holder } = found;
  const [call] = left.splice(index, 1);
  if (left.length === 0) calls.delete(holder);
  return call;
}

/** Whether the guard left a call for the handler of `context` (the interceptor then lets it through). */
export function hasGuardedCall(context: ExecutionContext): boolean {
  return findGuardedCall(context) !== undefined;
}

/** Where the call for the handler of `context` is kept, if the guard left one. */
function findGuardedCall(
  context: ExecutionContext,
): { holder: object; left: GuardedCall[]; index: number } | undefined {
  const holder = callHolder(context);
  const left = holder && calls.get(holder);
  if (!left) return undefined;
  const handler = context.getHandler();
  const index = left.findIndex((call) => call.context.getHandler() === handler);
  return index < 0 ? undefined : { holder: holder!, left, index };
}
