import { OutboxConfigurationError } from '../errors';
import { outboxMigrations, OUTBOX_MIGRATIONS } from './migrations';
import { IdempotencyRecord } from './idempotency-record.entity';
import { IdempotencyStep } from './idempotency-step.entity';
import { outboxEntities } from './outbox-entities';
import { OutboxAttempt } from './outbox-attempt.entity';
import { OutboxKeyLock } from './outbox-key-lock.entity';
import { OutboxMessage, OutboxMessageColumns } from './outbox-message.entity';
import { checkTableNamesFor, companionTablePath, outboxIndexNames, outboxTableNames } from './outbox-table-names';

describe('outbox table names', () => {
  it('keep the shipped table, index and constraint names without options', () => {
    const tables = outboxTableNames();
    expect(tables).toEqual({
      prefix: '',
      messages: 'outbox_messages',
      attempts: 'outbox_attempts',
      keyLocks: 'outbox_key_locks',
      idempotencyKeys: 'idempotency_keys',
      idempotencySteps: 'idempotency_steps',
    });
    // The names the shipped migrations have always created.
    expect(outboxIndexNames(tables)).toEqual({
      messages: {
        primaryKey: 'PK_d24ca6550fc486f101fe4f8b021',
        messageIdUnique: 'UQ_outbox_messages_message_destination',
        legacyMessageIdUnique: 'UQ_outbox_messages_message_id',
        claim: 'IDX_outbox_messages_claim',
        key: 'IDX_outbox_messages_key_destination',
        legacyKey: 'IDX_outbox_messages_key',
        cleanup: 'IDX_outbox_messages_cleanup',
        dead: 'IDX_outbox_messages_dead',
        cause: 'IDX_outbox_messages_cause',
      },
      attempts: {
        primaryKey: 'PK_e35a1f86fb21f9c97644a01b1f1',
        message: 'IDX_outbox_attempts_message',
        messageForeignKey: 'FK_outbox_attempts_message',
      },
      keyLocks: { primaryKey: 'PK_794d48abf644d4601dbc4ad193b' },
      idempotencyKeys: {
        primaryKey: 'PK_idempotency_keys',
        scopeKeyUnique: 'UQ_idempotency_keys_scope_key',
        expiresAt: 'IDX_idempotency_keys_expires_at',
      },
      idempotencySteps: {
        primaryKey: 'PK_idempotency_steps',
        scopeKeyStepUnique: 'UQ_idempotency_steps_scope_key_step',
        expiresAt: 'IDX_idempotency_steps_expires_at',
      },
    });
  });

  it('derive every name of a prefixed set from its table, none shared with the shipped set', () => {
    const shipped = Object.values(outboxIndexNames(outboxTableNames())).flatMap((s) => Object.values(s));
    const billing = Object.values(outboxIndexNames(outboxTableNames({ prefix: 'billing_' }))).flatMap((s) =>
      Object.values(s),
    );
    expect(billing).toContain('IDX_billing_outbox_messages_claim');
    expect(billing).toContain('FK_billing_outbox_attempts_message');
    expect(billing.filter((n) => shipped.includes(n))).toEqual([]);
    expect(new Set(billing).size).toBe(billing.length);
  });

  it('find the companions of an outbox table in its schema and with its prefix', () => {
    expect(companionTablePath('outbox_messages', 'attempts')).toBe('outbox_attempts');
    expect(companionTablePath('billing.b_outbox_messages', 'keyLocks')).toBe('billing.b_outbox_key_locks');
    expect(companionTablePath('custom', 'attempts')).toBe('outbox_attempts');
  });

  it.each([
    [{ prefix: 'bill-ing_' }, /tables\.prefix must be letters, digits and _/],
    [{ prefix: '1_' }, /tables\.prefix must be letters, digits and _/],
    [{ prefix: 'a b' }, /tables\.prefix/],
    [{ schema: 'a.b' }, /tables\.schema must be a schema name/],
    [{ schema: '' }, /tables\.schema must be a schema name/],
    [{ prefx: 'x_' }, /unknown option prefx/],
  ])('reject %j with OutboxConfigurationError', (options, message) => {
    expect(() => outboxTableNames(options as never)).toThrow(OutboxConfigurationError);
    expect(() => outboxTableNames(options as never)).toThrow(message);
  });

  it('check name lengths per database: 63 bytes on PostgreSQL, 64 on MySQL/MariaDB, none on SQLite', () => {
    // The longest derived name is UQ_<prefix>outbox_messages_message_destination: 38 characters + the prefix.
    const at64 = outboxTableNames({ prefix: 'p'.repeat(26) });
    expect(() => checkTableNamesFor(at64, 'postgres', 'test')).toThrow(OutboxConfigurationError);
    expect(() => checkTableNamesFor(at64, 'postgres', 'test')).toThrow(
      /longer than postgres allows \(63 bytes\): UQ_p{26}outbox_messages_message_destination\. Shorten the prefix by at least 1/,
    );
    expect(() => checkTableNamesFor(at64, 'mariadb', 'test')).not.toThrow();
    expect(() => checkTableNamesFor(outboxTableNames({ prefix: 'p'.repeat(27) }), 'mysql', 'test')).toThrow(/64 bytes/);
    expect(() => checkTableNamesFor(outboxTableNames({ prefix: 'p'.repeat(25) }), 'postgres', 'test')).not.toThrow();
    expect(() => checkTableNamesFor(at64, 'better-sqlite3', 'test')).not.toThrow();
  });

  it('accept a schema on PostgreSQL only', () => {
    const tables = outboxTableNames({ schema: 'billing' });
    expect(() => checkTableNamesFor(tables, 'postgres', 'test')).not.toThrow();
    expect(() => checkTableNamesFor(tables, 'mariadb', 'test')).toThrow(
      /supported on PostgreSQL only.*prefix: 'billing_'/,
    );
    expect(() => checkTableNamesFor(tables, 'better-sqlite3', 'test')).toThrow(OutboxConfigurationError);
  });
});

describe('outboxEntities() and outboxMigrations()', () => {
  it('give the shipped classes without options', () => {
    expect(outboxEntities()).toEqual([OutboxMessage, OutboxAttempt, OutboxKeyLock, IdempotencyRecord, IdempotencyStep]);
    expect(outboxEntities({})).toEqual(outboxEntities());
    expect(outboxMigrations()).toBe(OUTBOX_MIGRATIONS);
  });

  it('give the same classes for the same options, and others for other options', () => {
    const billing = outboxEntities({ prefix: 'billing_' });
    expect(outboxEntities({ prefix: 'billing_' })).toEqual(billing);
    expect(billing[0]).not.toBe(OutboxMessage);
    expect(new billing[0]()).toBeInstanceOf(OutboxMessageColumns);
    expect(billing.map((e) => e.name)).toEqual([
      'billing_OutboxMessage',
      'billing_OutboxAttempt',
      'billing_OutboxKeyLock',
      'billing_IdempotencyRecord',
      'billing_IdempotencyStep',
    ]);
    expect(outboxEntities({ prefix: 'billing_', schema: 's' })[0]).not.toBe(billing[0]);
    expect(outboxMigrations({ prefix: 'billing_' })).toBe(outboxMigrations({ prefix: 'billing_' }));
  });

  it('name each set of migrations apart, keeping the 13-digit timestamp at the end', () => {
    const names = (options: object) => outboxMigrations(options).map((m) => new m().name);
    expect(names({ prefix: 'billing_' })).toEqual([
      'CreateOutboxTables_billing_1764374400000',
      'CreateIdempotencyKeys_billing_1764460800000',
      'AddOutboxAttempts_billing_1765152000000',
      'CreateIdempotencySteps_billing_1765411200000',
      'AddOutboxDestinations_billing_1765497600000',
      'IdempotencyExpiryBrin_billing_1765584000000',
      'AddOutboxExpiry_billing_1765670400000',
      'AddOutboxCause_billing_1765756800000',
      'AddOutboxEditAudit_billing_1765843200000',
    ]);
    expect(names({ schema: 'billing' })[0]).toBe('CreateOutboxTables_billing.1764374400000');
    expect(names({ schema: 'b', prefix: 'x_' })[0]).toBe('CreateOutboxTables_b.x_1764374400000');
    expect(outboxMigrations({ prefix: 'billing_' }).map((m) => m.name)).toEqual(names({ prefix: 'billing_' }));
    expect(OUTBOX_MIGRATIONS.map((m) => new m().name)).toEqual(OUTBOX_MIGRATIONS.map((m) => m.name));
  });
});
