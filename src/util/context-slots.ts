import { AsyncLocalStorage } from 'node:async_hooks';

/**
 * The library's async context: ONE `AsyncLocalStorage` holding a small record of slots (the ambient transaction, the
 * mark of an idempotent handler's start, …). On Node 20 every enabled `AsyncLocalStorage` instance adds work to
 * every promise and callback the whole app creates (its store is copied onto each new async resource), so the
 * library keeps one instance rather than one per concern.
 */
const storage = new AsyncLocalStorage<SlotRecord>();

type SlotRecord = Readonly<Record<symbol, unknown>>;

/** One value carried along an async call chain, beside the library's other slots. */
export interface ContextSlot<T> {
  /** The value of the current async context, if any. */
  get(): T | undefined;
  /** Runs `work` with this slot set to `value`; the other slots keep their values. */
  run<R>(value: T, work: () => R): R;
}

/** A new slot; `name` is for debugging only (each slot has its own key). */
export function contextSlot<T>(name: string): ContextSlot<T> {
  const key = Symbol(name);
  return {
    get: () => storage.getStore()?.[key] as T | undefined,
    run: (value, work) => storage.run({ ...storage.getStore(), [key]: value }, work),
  };
}

/** Runs `work` with every slot empty (background work must carry nothing of the call that started it). */
export function outsideEveryContextSlot<T>(work: () => T): T {
  return storage.exit(work);
}
