import { AbstractSqliteDriver } from 'typeorm/driver/sqlite-abstract/AbstractSqliteDriver';
import type { ColumnMetadata } from 'typeorm/metadata/ColumnMetadata';

/**
 * The outbox's `seq` is a BIGINT auto-increment key on PostgreSQL and MySQL, but SQLite accepts AUTOINCREMENT only
 * on a column declared exactly `INTEGER` (which is 64-bit there anyway). TypeORM fixes a column's type once for
 * every database, so this teaches its SQLite drivers to declare the columns registered here as `integer`.
 */
const integerKeys = new Set<Function>();

/** Declares the generated keys of `entity` and of every subclass of it (the entities of each table set). */
export function declareSqliteIntegerKey(entity: Function): void {
  integerKeys.add(entity);
}

function hasIntegerKey(target: Function): boolean {
  for (let type: unknown = target; typeof type === 'function'; type = Object.getPrototypeOf(type)) {
    if (integerKeys.has(type)) return true;
  }
  return false;
}

const prototype = AbstractSqliteDriver.prototype as unknown as {
  normalizeType(column: Partial<ColumnMetadata>): string;
  __outboxPatched?: boolean;
};
if (!prototype.__outboxPatched) {
  const original = prototype.normalizeType;
  prototype.normalizeType = function (this: unknown, column: Partial<ColumnMetadata>) {
    const target = column.entityMetadata?.target;
    if (
      column.isGenerated &&
      column.generationStrategy === 'increment' &&
      typeof target === 'function' &&
      hasIntegerKey(target)
    ) {
      return 'integer';
    }
    return original.call(this, column);
  };
  prototype.__outboxPatched = true;
}
