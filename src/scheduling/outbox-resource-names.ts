import { isDefaultDataSource, OUTBOX_PUBLISHER_JOB } from '../outbox.constants';

/** Name under which the scheduled cleanup is registered in `SchedulerRegistry`. */
export const OUTBOX_CLEANUP_JOB = 'nestjs-outbox:cleanup';

/** First key of the two-key advisory locks that serialize same-key writers on PostgreSQL ('outb' in ASCII). */
export const OUTBOX_ADVISORY_LOCK_CLASS = 0x6f757462;

/**
 * The process-wide and database-wide names one outbox uses, so that several outboxes (one per DataSource) never
 * share one: its jobs in `SchedulerRegistry`, its PostgreSQL `NOTIFY` channel and the first key of its advisory
 * locks. The default DataSource keeps the names it always had; a named one (`OutboxModule.forRoot({ dataSource })`)
 * gets names derived from its DataSource name. Every process writing to one outbox must give it the same name.
 */
export interface OutboxResourceNames {
  /** The publisher's interval in `SchedulerRegistry`. */
  publisherJob: string;
  /** The cleanup's interval in `SchedulerRegistry`. */
  cleanupJob: string;
  /** The PostgreSQL `LISTEN`/`NOTIFY` channel (at most 63 characters). */
  notifyChannel: string;
  /** First key (int4) of `pg_advisory_xact_lock(class, hashtext(key))`, taken by same-key writers. */
  advisoryLockClass: number;
  /**
   * PostgreSQL WAL modes: the replication slot and the publication of this outbox (lower case, at most 63
   * characters; the NOTIFY channel's name).
   */
  replicationSlot: string;
}

/** The context of a log line of one outbox: `base` for the default DataSource, `base(name)` for a named one. */
export function outboxLogContext(base: string, dataSourceName: string | undefined): string {
  return isDefaultDataSource(dataSourceName) ? base : `${base}(${dataSourceName})`;
}

/** The names of the outbox of the DataSource `dataSourceName` whose table is `table` (its path, schema included). */
export function outboxResourceNames(dataSourceName: string | undefined, table: string): OutboxResourceNames {
  const identifier = (text: string) => text.replace(/[^A-Za-z0-9_]/g, '_');
  if (isDefaultDataSource(dataSourceName)) {
    return {
      publisherJob: OUTBOX_PUBLISHER_JOB,
      cleanupJob: OUTBOX_CLEANUP_JOB,
      notifyChannel: `nestjs_outbox_${identifier(table)}`.slice(0, 63),
      advisoryLockClass: advisoryLockClassOf(dataSourceName),
      replicationSlot: slotName(`nestjs_outbox_${identifier(table)}`),
    };
  }
  const name = dataSourceName!;
  const channel = `nestjs_outbox_${identifier(name)}_${identifier(table)}`;
  return {
    publisherJob: `${OUTBOX_PUBLISHER_JOB}:${name}`,
    cleanupJob: `${OUTBOX_CLEANUP_JOB}:${name}`,
    // A long name is cut and suffixed with a hash of the whole, so two long names stay apart.
    notifyChannel:
      channel.length <= 63 ? channel : `${channel.slice(0, 54)}_${fnv1a(channel).toString(16).padStart(8, '0')}`,
    advisoryLockClass: advisoryLockClassOf(name),
    replicationSlot: slotName(channel),
  };
}

/**
 * A replication slot's name: lower case letters, digits and `_`, at most 63. One that had upper case letters or was
 * longer is cut and suffixed with a hash of the whole, so `Billing` and `billing` stay apart.
 */
function slotName(name: string): string {
  const lower = name.toLowerCase();
  if (lower === name && name.length <= 63) return name;
  return `${lower.slice(0, 54)}_${fnv1a(name).toString(16).padStart(8, '0')}`;
}

/** The advisory lock class of a DataSource's outbox: the default one's, or an int4 of its own for a named one. */
export function advisoryLockClassOf(dataSourceName: string | undefined): number {
  if (isDefaultDataSource(dataSourceName)) return OUTBOX_ADVISORY_LOCK_CLASS;
  const name = dataSourceName!;
  const hash = fnv1a(`nestjs-outbox:${name}`) | 0; // int4, as pg_advisory_xact_lock(int4, int4) takes it
  return hash === OUTBOX_ADVISORY_LOCK_CLASS ? hash ^ 1 : hash;
}

/** 32-bit FNV-1a of a string's UTF-16 code units (unsigned). */
function fnv1a(text: string): number {
  let hash = 0x811c9dc5;
  for (let i = 0; i < text.length; i++) {
    hash ^= text.charCodeAt(i);
    hash = Math.imul(hash, 0x01000193);
  }
  return hash >>> 0;
}
