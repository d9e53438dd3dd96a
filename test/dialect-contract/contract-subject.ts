import { DataSource } from 'typeorm';
import { OutboxMessage } from '../../src';
import { OutboxAttempt } from '../../src/schema/outbox-attempt.entity';
import { OutboxKeyLock } from '../../src/schema/outbox-key-lock.entity';
import type { OutboxDialect } from '../../src/dialects/outbox-dialect';
import { resolveDialect } from '../../src/dialects/resolve-dialect';
import { OUTBOX_TABLE } from '../../src/outbox.constants';
import type { DatabaseKind } from '../helpers/databases';
import { useTestDatabase } from '../helpers/e2e-fixture';

/** What the dialect contract runs against: a dialect, and a database with the outbox tables. */
export interface DialectSubject {
  dialect: OutboxDialect;
  /** A DataSource with the outbox entities; its tables are the ones the dialect works on. */
  dataSource: DataSource;
  /** The outbox table (unquoted). */
  table: string;
}

/**
 * Registers the jest hooks that create a fresh database of `kind` with the outbox tables (synchronize from the
 * entities) before the suite, and dispose the dialect, close the DataSource and drop the database after it.
 * `dialectOf` picks the dialect under test (default: the one the library resolves for the DataSource).
 */
export function useDialectSubject(
  kind: DatabaseKind,
  dialectOf: (dataSource: DataSource) => OutboxDialect = resolveDialect,
): () => DialectSubject {
  const fx = useTestDatabase(kind);
  let subject: DialectSubject | undefined;
  beforeAll(async () => {
    const dataSource = new DataSource({
      ...fx.db.options,
      entities: [OutboxMessage, OutboxKeyLock, OutboxAttempt],
      synchronize: true,
      logging: false,
    } as never);
    await dataSource.initialize();
    fx.defer(() => dataSource.destroy());
    const dialect = dialectOf(dataSource);
    fx.defer(() => dialect.dispose(dataSource));
    await dialect.prepare(dataSource.manager, OUTBOX_TABLE);
    subject = { dialect, dataSource, table: OUTBOX_TABLE };
  });
  return () => {
    if (!subject) throw new Error(`The ${kind} dialect subject is used before its beforeAll created it`);
    return subject;
  };
}
