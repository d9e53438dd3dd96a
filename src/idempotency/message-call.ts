import type { ExecutionContext } from '@nestjs/common';
import type { HandlerBody } from './idempotent-call.types';

/**
 * One message on the message path of `@Idempotent()` (see `message-path.ts`): what `IdempotentMessageGuard` learnt
 * before the pipes ran, handed to the handler's wrapper as a hidden last argument. The wrapper removes it and runs
 * the handler's body through `run`.
 */
export class GuardedMessageCall {
  constructor(
    /** The guard's execution context (the handler, its class, the message's data and transport context). */
    readonly context: ExecutionContext,
    /** The message's key (its outbox id or the `key` option's value); undefined or empty when it has none. */
    readonly key: string | undefined,
    /** The guard's `handleMessage`. */
    private readonly handle: (
      context: ExecutionContext,
      key: string | undefined,
      body: HandlerBody,
    ) => Promise<unknown>,
  ) {}

  /** Runs `body` (the handler's own body) guarded by the key; resolves with what the caller receives. */
  run(body: HandlerBody): Promise<unknown> {
    return this.handle(this.context, this.key, body);
  }
}

/**
 * The hidden argument when no guard saw the message (its transport passed neither a context object nor object
 * data to key it by): the wrapper refuses to run the handler unguarded.
 */
export const UNGUARDED_MESSAGE = Symbol('message not seen by IdempotentMessageGuard');

/**
 * Calls left by the guard, per transport context (else per data object): one message can reach several handlers
 * (two `@EventPattern`s of one pattern share its transport context), so each call is taken by its handler.
 */
const calls = new WeakMap<object, GuardedMessageCall[]>();

export function leaveGuardedCall(holder: object, call: GuardedMessageCall): void {
  const left = calls.get(holder);
  if (left) left.push(call);
  else calls.set(holder, [call]);
}

/** Takes the call the guard left for the handler of `context`; undefined when the guard did not see the message. */
export function takeGuardedCall(context: ExecutionContext): GuardedMessageCall | undefined {
  const found = findGuardedCall(context);
  if (!found) return undefined;
  const { left, index, holder } = found;
  const [call] = left.splice(index, 1);
  if (left.length === 0) calls.delete(holder);
  return call;
}

/** Whether the guard left a call for the handler of `context` (the interceptor then lets the message through). */
export function hasGuardedCall(context: ExecutionContext): boolean {
  return findGuardedCall(context) !== undefined;
}

/** Where the call for the handler of `context` is kept, if the guard left one. */
function findGuardedCall(
  context: ExecutionContext,
): { holder: object; left: GuardedMessageCall[]; index: number } | undefined {
  const holder = messageHolder(context);
  const left = holder && calls.get(holder);
  if (!left) return undefined;
  const handler = context.getHandler();
  const index = left.findIndex((call) => call.context.getHandler() === handler);
  return index < 0 ? undefined : { holder: holder!, left, index };
}

/** What a message's calls are kept by: its transport context (argument 1), else its data (argument 0). */
export function messageHolder(context: ExecutionContext): object | undefined {
  for (const index of [1, 0]) {
    const value: unknown = context.getArgByIndex(index);
    if ((typeof value === 'object' && value !== null) || typeof value === 'function') return value as object;
  }
  return undefined;
}
