/**
 * class-transformer is an optional peer: when the app has it, stored responses go through `instanceToPlain` (as
 * `ClassSerializerInterceptor` does), so `@Exclude()`d fields are never stored. Loaded once at startup with a dynamic
 * `import()`, which works from both the CommonJS and the ES module build.
 */
type ClassTransformer = { instanceToPlain(value: unknown): unknown };

let loaded: ClassTransformer | null | undefined;

/** Loads class-transformer if it is installed (called from `IdempotencyService.onModuleInit`). */
export async function loadClassTransformer(): Promise<void> {
  if (loaded !== undefined) return;
  try {
    const module = (await import('class-transformer')) as unknown as ClassTransformer & { default?: ClassTransformer };
    loaded = typeof module.instanceToPlain === 'function' ? module : (module.default ?? null);
  } catch {
    loaded = null;
  }
}

/** The value as the client receives it: class instances (and arrays of them) through `instanceToPlain`. */
export function toPlain(value: unknown): unknown {
  if (typeof value !== 'object' || value === null) return value;
  const plainObject = (v: unknown) => {
    const proto = Object.getPrototypeOf(v);
    return proto === null || proto === Object.prototype;
  };
  const needsTransform = Array.isArray(value)
    ? value.some((v) => typeof v === 'object' && v !== null && !plainObject(v))
    : !plainObject(value) && !(value instanceof Date);
  if (!needsTransform) return value;
  return loaded ? loaded.instanceToPlain(value) : value;
}
