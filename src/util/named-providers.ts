import { Inject, type Provider, type Type } from '@nestjs/common';
import { OPTIONAL_DEPS_METADATA, PARAMTYPES_METADATA, SELF_DECLARED_DEPS_METADATA } from '@nestjs/common/constants';
import { getOutboxToken } from '../outbox.constants';

/**
 * The providers of a named DataSource's outbox: each class under its own token (`getOutboxToken(X, name)`), never
 * under the class itself, so that the default outbox (and `app.get(OutboxService)`) stays unambiguous beside it.
 * Each class is given as a subclass whose constructor parameters of the outbox's own classes point at the same
 * outbox's tokens; every other parameter (`@Inject(token)`, `@Optional()`, `ModuleRef`, …) is left as declared.
 */
export function namedOutboxProviders(classes: readonly Type<unknown>[], dataSource: string): Provider[] {
  const tokens = namedOutboxTokens(classes, dataSource);
  return classes.map((type) => ({ provide: tokens.get(type)!, useClass: withInjectedTokens(type, tokens) }));
}

/** Each of the outbox's `classes` mapped to its token in the outbox of the DataSource `dataSource`. */
export function namedOutboxTokens(
  classes: readonly Type<unknown>[],
  dataSource: string,
): Map<unknown, string | Type<unknown>> {
  return new Map<unknown, string | Type<unknown>>(classes.map((type) => [type, getOutboxToken(type, dataSource)]));
}

/**
 * A subclass of `type` whose constructor parameters typed with a key of `tokens` are injected by that token
 * instead. Parameters that declare their own token (`@Inject()`) keep it. `type` itself is untouched.
 */
export function withInjectedTokens<T>(
  type: Type<T>,
  tokens: ReadonlyMap<unknown, string | Type<unknown>>,
  name = type.name,
): Type<T> {
  const subclass = class extends (type as Type<any>) {} as Type<T>;
  Object.defineProperty(subclass, 'name', { value: name });
  const paramTypes: unknown[] = Reflect.getMetadata(PARAMTYPES_METADATA, type) ?? [];
  const declared: { index: number }[] = Reflect.getMetadata(SELF_DECLARED_DEPS_METADATA, type) ?? [];
  // The subclass gets the constructor's metadata as its own: Nest 12 reads `@Optional()` from the class itself.
  Reflect.defineMetadata(PARAMTYPES_METADATA, [...paramTypes], subclass);
  Reflect.defineMetadata(SELF_DECLARED_DEPS_METADATA, [...declared], subclass);
  Reflect.defineMetadata(
    OPTIONAL_DEPS_METADATA,
    [...(Reflect.getMetadata(OPTIONAL_DEPS_METADATA, type) ?? [])],
    subclass,
  );
  paramTypes.forEach((paramType, index) => {
    const token = tokens.get(paramType);
    if (token !== undefined && !declared.some((d) => d.index === index)) Inject(token)(subclass, undefined, index);
  });
  return subclass;
}
