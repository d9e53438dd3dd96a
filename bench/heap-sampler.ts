import { setFlagsFromString } from 'node:v8';
import { runInNewContext } from 'node:vm';

/** A full garbage collection (via --expose-gc set at run time), or a no-op where that is refused. */
export function exposeGc(): () => void {
  const existing = (global as { gc?: () => void }).gc;
  if (existing) return existing;
  try {
    setFlagsFromString('--expose-gc');
    return runInNewContext('gc') as () => void;
  } catch {
    return () => undefined;
  }
}

/** Heap in use right after a full GC, in bytes. */
export function heapAfterGc(gc: () => void): number {
  gc();
  return process.memoryUsage().heapUsed;
}
