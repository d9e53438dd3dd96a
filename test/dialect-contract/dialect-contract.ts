import { randomUUID } from 'node:crypto';
import { In } from 'typeorm';
import { OutboxMessage } from '../../src';
import { OutboxAttempt } from '../../src/schema/outbox-attempt.entity';
import type { ClaimedOutboxRow, DeadRowFilter, NewOutboxRow } from '../../src/dialects/outbox-dialect';
import type { DialectSubject } from './contract-subject';
import { REPLACE_DEAD_CHECK } from './replace-dead.check';

/** One promise of the `OutboxDialect` interface, checked against a real database; throws when it is broken. */
export interface DialectCheck {
  name: string;
  run(subject: DialectSubject): Promise<void>;
}

const LEASE = 60_000;

/** Empties the outbox table (its attempt history goes with it), so every check starts from nothing. */
async function reset({ dataSource }: DialectSubject): Promise<void> {
  await dataSource.createQueryBuilder().delete().from(OutboxMessage).execute();
}

/** The attempt rows of a message, oldest first, read with TypeORM (not through the dialect under test). */
async function attemptsOf(s: DialectSubject, messageId: string): Promise<OutboxAttempt[]> {
  const message = await row(s, messageId);
  if (!message) return s.dataSource.getRepository(OutboxAttempt).find({ where: { messageSeq: '-1' } });
  return s.dataSource.getRepository(OutboxAttempt).find({ where: { messageSeq: message.seq }, order: { id: 'ASC' } });
}

const allAttempts = (s: DialectSubject) => s.dataSource.getRepository(OutboxAttempt).count();

const HISTORY = { publisher: 'host-a:42', limit: 2 };

/** Writes rows through the dialect under test, each a unique message id with the given fields. */
async function insert(s: DialectSubject, ...rows: Array<Partial<NewOutboxRow> & { messageId: string }>): Promise<void> {
  await s.dialect.insert(
    s.dataSource.manager,
    s.table,
    rows.map((r) => ({ pattern: 'E', payload: '{}', headers: null, key: null, ...r })),
  );
}

const claim = (s: DialectSubject, owner: string, limit = 100, leaseMs = LEASE): Promise<ClaimedOutboxRow[]> =>
  s.dialect.claim(s.dataSource.manager, { table: s.table, owner, limit, leaseMs });

const ids = (rows: readonly ClaimedOutboxRow[]) => rows.map((r) => r.messageId);

const row = (s: DialectSubject, messageId: string) =>
  s.dataSource.getRepository(OutboxMessage).findOneBy({ messageId });

const update = (s: DialectSubject, messageIds: string[], changes: Partial<OutboxMessage>) =>
  s.dataSource.getRepository(OutboxMessage).update({ messageId: In(messageIds) }, changes);

/** The database clock in epoch ms, read through the dialect's `nowMs`. */
async function dbNow(s: DialectSubject): Promise<number> {
  const [record] = await s.dataSource.query(`SELECT ${s.dialect.nowMs} AS ${s.dialect.quote('now')}`);
  return Number(record.now);
}

/** Unique message ids for one check: `a`, `b`, … get a shared random suffix. */
function names<T extends string>(...labels: T[]): Record<T, string> {
  const suffix = randomUUID().slice(0, 8);
  return Object.fromEntries(labels.map((l) => [l, `${l}-${suffix}`])) as Record<T, string>;
}

/**
 * The behaviour every `OutboxDialect` promises (src/dialects/outbox-dialect.ts), as named checks. The jest suite
 * (`describeDialectContract`) turns each into a test per database; a spec runs them against broken dialects to
 * prove each check can fail.
 */
export const DIALECT_CHECKS: readonly DialectCheck[] = [
  {
    name: 'quote() makes any identifier usable: reserved words and the quote character itself',
    async run(s) {
      const odd = 'we"ird`name';
      const [record] = await s.dataSource.query(
        `SELECT 1 AS ${s.dialect.quote('order')}, 2 AS ${s.dialect.quote(odd)}`,
      );
      expect(Number(record.order)).toBe(1);
      expect(Number(record[odd])).toBe(2);
    },
  },
  {
    name: 'param(i) is the placeholder of the i-th parameter',
    async run(s) {
      const p = (i: number) => s.dialect.param(i);
      const q = (c: string) => s.dialect.quote(c);
      const [record] = await s.dataSource.query(`SELECT ${p(1)} AS ${q('a')}, ${p(2)} AS ${q('b')}`, [
        'first',
        'second',
      ]);
      expect([String(record.a), String(record.b)]).toEqual(['first', 'second']);
    },
  },
  {
    name: 'insert() then claim(): every field round-trips, in write order, with the attempt counted',
    async run(s) {
      await reset(s);
      const n = names('a', 'b', 'c');
      await insert(
        s,
        {
          messageId: n.a,
          pattern: 'OrderPlaced',
          payload: '{"id":1,"text":"ünï ✓"}',
          headers: '{"tenant":"acme"}',
          key: 'k',
        },
        { messageId: n.b, pattern: 'Other', payload: '[]' },
        { messageId: n.c, pattern: 'OrderPlaced', payload: '{"id":2}', key: 'k' },
      );
      const rows = await claim(s, randomUUID());
      expect(rows).toEqual([
        {
          seq: expect.any(String),
          messageId: n.a,
          pattern: 'OrderPlaced',
          payload: '{"id":1,"text":"ünï ✓"}',
          headers: '{"tenant":"acme"}',
          key: 'k',
          destination: '',
          attempts: 1,
          ageMs: expect.any(Number),
        },
        {
          seq: expect.any(String),
          messageId: n.b,
          pattern: 'Other',
          payload: '[]',
          headers: null,
          key: null,
          destination: '',
          attempts: 1,
          ageMs: expect.any(Number),
        },
        {
          seq: expect.any(String),
          messageId: n.c,
          pattern: 'OrderPlaced',
          payload: '{"id":2}',
          headers: null,
          key: 'k',
          destination: '',
          attempts: 1,
          ageMs: expect.any(Number),
        },
      ]);
      const seqs = rows.map((r) => BigInt(r.seq));
      expect(seqs[0] < seqs[1] && seqs[1] < seqs[2]).toBe(true);
    },
  },
  {
    name: "insert() writes through the caller's transaction: a rollback leaves no row",
    async run(s) {
      await reset(s);
      const n = names('kept', 'dropped');
      await s.dataSource.transaction((tx) =>
        s.dialect.insert(tx, s.table, [{ messageId: n.kept, pattern: 'E', payload: '{}', headers: null, key: 'k' }]),
      );
      const rolledBack = s.dataSource.transaction(async (tx) => {
        await s.dialect.insert(tx, s.table, [
          { messageId: n.dropped, pattern: 'E', payload: '{}', headers: null, key: 'k' },
        ]);
        throw new Error('roll back');
      });
      await expect(rolledBack).rejects.toThrow('roll back');
      expect((await s.dataSource.getRepository(OutboxMessage).find()).map((r) => r.messageId)).toEqual([n.kept]);
    },
  },
  {
    name: 'insert() stamps created_at and available_at on the database clock; delay and availableAt set the due time',
    async run(s) {
      await reset(s);
      const n = names('now', 'delayed', 'dated');
      const before = await dbNow(s);
      await insert(
        s,
        { messageId: n.now },
        { messageId: n.delayed, delay: 60_000 },
        { messageId: n.dated, availableAt: before + 120_000 },
      );
      const after = await dbNow(s);
      const now = (await row(s, n.now))!;
      expect(now.createdAt.getTime()).toBeGreaterThanOrEqual(before);
      expect(now.createdAt.getTime()).toBeLessThanOrEqual(after);
      expect(now.availableAt.getTime()).toBe(now.createdAt.getTime());
      const delayed = (await row(s, n.delayed))!;
      expect(delayed.availableAt.getTime()).toBe(delayed.createdAt.getTime() + 60_000);
      expect((await row(s, n.dated))!.availableAt.getTime()).toBe(before + 120_000);
      expect(now).toMatchObject({ status: 'pending', attempts: 0, claimedBy: null, claimedUntil: null, sentAt: null });
    },
  },
  {
    name: 'insert() stamps expires_at on the database clock (expiresIn after created_at, or expiresAt); claim() reports the time left',
    async run(s) {
      await reset(s);
      const n = names('never', 'soon', 'dated');
      const before = await dbNow(s);
      await insert(
        s,
        { messageId: n.never },
        { messageId: n.soon, expiresIn: 60_000, delay: 1000 },
        { messageId: n.dated, expiresAt: before + 120_000 },
      );
      expect((await row(s, n.never))!.expiresAt).toBeNull();
      const soon = (await row(s, n.soon))!;
      expect(soon.expiresAt!.getTime()).toBe(soon.createdAt.getTime() + 60_000);
      expect(soon.availableAt.getTime()).toBe(soon.createdAt.getTime() + 1000);
      expect((await row(s, n.dated))!.expiresAt!.getTime()).toBe(before + 120_000);
      await update(s, [n.soon], { availableAt: new Date(before - 1000) });
      const claimed = await claim(s, randomUUID());
      const after = await dbNow(s);
      expect(ids(claimed)).toEqual([n.never, n.soon, n.dated]);
      expect(claimed[0].expiresInMs).toBeUndefined();
      expect(claimed[1].expiresInMs).toBeLessThanOrEqual(soon.expiresAt!.getTime() - before);
      expect(claimed[1].expiresInMs).toBeGreaterThanOrEqual(soon.expiresAt!.getTime() - after);
      expect(claimed[2].expiresInMs).toBeLessThanOrEqual(120_000);
      expect(claimed[2].expiresInMs).toBeGreaterThanOrEqual(before + 120_000 - after);
    },
  },
  {
    name: 'claim(): an expired earlier row of a key holds nothing back (dead or pending), unless a publisher holds it',
    async run(s) {
      await reset(s);
      const n = names('gone', 'next', 'last');
      const now = await dbNow(s);
      await insert(s, { messageId: n.gone, key: 'k', expiresAt: now - 1000 }, { messageId: n.next, key: 'k' });
      await insert(s, { messageId: n.last, key: 'k' });
      // The expired head is dead: the rest of its key goes.
      await update(s, [n.gone], { status: 'dead' });
      expect(ids(await claim(s, randomUUID(), 1))).toEqual([n.next]);
      await update(s, [n.next], { status: 'sent', claimedBy: null, claimedUntil: null });
      // The expired head waits for a retry, or is pending and unclaimed: nothing waits for it.
      await update(s, [n.gone], { status: 'pending', availableAt: new Date(now + 60_000) });
      expect(ids(await claim(s, randomUUID()))).toEqual([n.last]);
      await update(s, [n.last], { claimedBy: null, claimedUntil: null });
      // A publisher holds the expired head (it may be publishing it right now): its key waits.
      await update(s, [n.gone], {
        availableAt: new Date(now - 1000),
        claimedBy: 'x',
        claimedUntil: new Date(now + 60_000),
      });
      expect(await claim(s, randomUUID())).toEqual([]);
      // A dead head that has not expired still holds its key back.
      await update(s, [n.gone], {
        status: 'dead',
        expiresAt: new Date(now + 60_000),
        claimedBy: null,
        claimedUntil: null,
      });
      expect(await claim(s, randomUUID())).toEqual([]);
    },
  },
  {
    name: 'claim() takes only rows that are due on the database clock',
    async run(s) {
      await reset(s);
      const n = names('due', 'delayed', 'future', 'past');
      const now = await dbNow(s);
      await insert(
        s,
        { messageId: n.due },
        { messageId: n.delayed, delay: 60_000 },
        { messageId: n.future, availableAt: now + 60_000 },
        { messageId: n.past, availableAt: now - 60_000 },
      );
      expect(ids(await claim(s, randomUUID()))).toEqual([n.due, n.past]);
      await update(s, [n.delayed], { availableAt: new Date(now - 1000) });
      expect(ids(await claim(s, randomUUID()))).toEqual([n.delayed]);
    },
  },
  {
    name: 'claim() takes at most `limit` rows, the oldest first',
    async run(s) {
      await reset(s);
      const n = names('a', 'b', 'c', 'd');
      await insert(s, { messageId: n.a }, { messageId: n.b }, { messageId: n.c }, { messageId: n.d });
      expect(ids(await claim(s, randomUUID(), 2))).toEqual([n.a, n.b]);
      expect(ids(await claim(s, randomUUID(), 2))).toEqual([n.c, n.d]);
    },
  },
  {
    name: 'claim() sets a lease of leaseMs on the database clock; a leased row is claimable again only once it expired',
    async run(s) {
      await reset(s);
      const n = names('a');
      const [first, second] = [randomUUID(), randomUUID()];
      await insert(s, { messageId: n.a });
      const before = await dbNow(s);
      expect(ids(await claim(s, first, 10, 30_000))).toEqual([n.a]);
      const after = await dbNow(s);
      const claimed = (await row(s, n.a))!;
      expect(claimed.claimedBy).toBe(first);
      expect(claimed.claimedUntil!.getTime()).toBeGreaterThanOrEqual(before + 30_000);
      expect(claimed.claimedUntil!.getTime()).toBeLessThanOrEqual(after + 30_000);
      expect(await claim(s, second)).toEqual([]);
      await update(s, [n.a], { claimedUntil: new Date(before - 1000) });
      expect(await claim(s, second)).toEqual([expect.objectContaining({ messageId: n.a, attempts: 2 })]);
      expect((await row(s, n.a))!.claimedBy).toBe(second);
    },
  },
  {
    name: "claim() keeps each key's order: a key is claimed only as a prefix, blocked by an in-flight, retrying or dead head",
    async run(s) {
      await reset(s);
      const n = names('k1', 'k2', 'k3', 'other', 'none');
      await insert(s, { messageId: n.k1, key: 'k' }, { messageId: n.k2, key: 'k' }, { messageId: n.k3, key: 'k' });
      await insert(s, { messageId: n.other, key: 'other' }, { messageId: n.none });
      const a = randomUUID();
      const [head] = await claim(s, a, 1);
      expect(head.messageId).toBe(n.k1);
      // The head is in flight: the rest of its key waits; other keys do not.
      expect(ids(await claim(s, randomUUID()))).toEqual([n.other, n.none]);
      // The head waits for a retry: its key still waits.
      expect(
        await s.dialect.markFailed(s.dataSource.manager, s.table, a, [
          { seq: head.seq, error: 'no', retryDelay: 60_000, dead: false },
        ]),
      ).toBe(1);
      expect(await claim(s, randomUUID())).toEqual([]);
      // The head is dead: its key still waits, until the dead head is gone.
      await update(s, [n.k1], { status: 'dead' });
      expect(await claim(s, randomUUID())).toEqual([]);
      expect(await s.dialect.purgeDead(s.dataSource.manager, s.table, [n.k1])).toBe(1);
      expect(ids(await claim(s, randomUUID()))).toEqual([n.k2, n.k3]);
    },
  },
  {
    name: "claim() keeps each key's order per destination: a held-back head holds back only its own destination's rows",
    async run(s) {
      await reset(s);
      const n = names('m1', 'm2', 'm3');
      // Three messages of key k, each one row for broker:A and one for handler:h (same message id).
      for (const id of [n.m1, n.m2, n.m3]) {
        await insert(
          s,
          { messageId: id, key: 'k', destination: 'broker:A' },
          { messageId: id, key: 'k', destination: 'handler:h' },
        );
      }
      const a = randomUUID();
      const first = await claim(s, a, 2);
      expect(first.map((r) => [r.messageId, r.destination])).toEqual([
        [n.m1, 'broker:A'],
        [n.m1, 'handler:h'],
      ]);
      // A's head waits for a retry: A's later rows wait, h's flow.
      const headA = first.find((r) => r.destination === 'broker:A')!;
      const headH = first.find((r) => r.destination === 'handler:h')!;
      await s.dialect.markFailed(s.dataSource.manager, s.table, a, [
        { seq: headA.seq, error: 'down', retryDelay: 60_000, dead: false },
      ]);
      await s.dialect.markSent(s.dataSource.manager, s.table, a, [headH.seq]);
      const rest = await claim(s, randomUUID());
      expect(rest.map((r) => [r.messageId, r.destination])).toEqual([
        [n.m2, 'handler:h'],
        [n.m3, 'handler:h'],
      ]);
      // A's head is dead: A still waits; purging it lets A's rows go, in order.
      await s.dataSource.getRepository(OutboxMessage).update({ seq: headA.seq }, { status: 'dead' });
      expect(await claim(s, randomUUID())).toEqual([]);
      await s.dataSource.getRepository(OutboxMessage).delete({ seq: headA.seq });
      expect((await claim(s, randomUUID())).map((r) => [r.messageId, r.destination])).toEqual([
        [n.m2, 'broker:A'],
        [n.m3, 'broker:A'],
      ]);
    },
  },
  {
    name: "claim(): a row for every destination ('') is in every destination's order of its key",
    async run(s) {
      await reset(s);
      const n = names('old', 'a1', 'b1', 'dead', 'all', 'b2');
      // An every-destination row waiting for a retry holds back both destinations of its key.
      await insert(s, { messageId: n.old, key: 'k', delay: 60_000 });
      await insert(s, { messageId: n.a1, key: 'k', destination: 'broker:A' });
      await insert(s, { messageId: n.b1, key: 'k', destination: 'broker:B' });
      // On key j: A's dead head holds back the every-destination row after it, and so B's row after that one.
      await insert(s, { messageId: n.dead, key: 'j', destination: 'broker:A' });
      await insert(s, { messageId: n.all, key: 'j' });
      await insert(s, { messageId: n.b2, key: 'j', destination: 'broker:B' });
      await update(s, [n.dead], { status: 'dead' });
      expect(await claim(s, randomUUID())).toEqual([]);
      // Once the held-back rows are gone, the rest go.
      await s.dialect.purgeDead(s.dataSource.manager, s.table, [n.dead]);
      await s.dataSource.getRepository(OutboxMessage).delete({ messageId: n.old });
      expect(ids(await claim(s, randomUUID()))).toEqual([n.a1, n.b1, n.all]);
    },
  },
  {
    name: 'markSent() marks sent on the database clock and clears the claim, only for the owner (a wrong owner changes 0 rows)',
    async run(s) {
      await reset(s);
      const n = names('a', 'b');
      const owner = randomUUID();
      await insert(s, { messageId: n.a }, { messageId: n.b });
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      expect(await s.dialect.markSent(s.dataSource.manager, s.table, randomUUID(), seqs)).toBe(0);
      expect(await row(s, n.a)).toMatchObject({ status: 'pending', claimedBy: owner, sentAt: null });
      const before = await dbNow(s);
      expect(await s.dialect.markSent(s.dataSource.manager, s.table, owner, seqs)).toBe(2);
      const after = await dbNow(s);
      for (const id of [n.a, n.b]) {
        const sent = (await row(s, id))!;
        expect(sent).toMatchObject({ status: 'sent', claimedBy: null, claimedUntil: null, attempts: 1 });
        expect(sent.sentAt!.getTime()).toBeGreaterThanOrEqual(before);
        expect(sent.sentAt!.getTime()).toBeLessThanOrEqual(after);
      }
      expect(await s.dialect.markSent(s.dataSource.manager, s.table, owner, [])).toBe(0);
    },
  },
  {
    name: 'markFailed() schedules a retry after retryDelay or marks dead, records the error, only for the owner',
    async run(s) {
      await reset(s);
      const n = names('retry', 'dead');
      const owner = randomUUID();
      await insert(s, { messageId: n.retry }, { messageId: n.dead });
      const [retry, dead] = await claim(s, owner);
      const failures = [
        { seq: retry.seq, error: 'broker said no', retryDelay: 60_000, dead: false },
        { seq: dead.seq, error: 'poison', retryDelay: 0, dead: true },
      ];
      expect(await s.dialect.markFailed(s.dataSource.manager, s.table, randomUUID(), failures)).toBe(0);
      expect(await row(s, n.retry)).toMatchObject({ status: 'pending', claimedBy: owner, lastError: null });
      const before = await dbNow(s);
      expect(await s.dialect.markFailed(s.dataSource.manager, s.table, owner, failures)).toBe(2);
      const retried = (await row(s, n.retry))!;
      expect(retried).toMatchObject({
        status: 'pending',
        lastError: 'broker said no',
        claimedBy: null,
        claimedUntil: null,
        attempts: 1,
      });
      expect(retried.availableAt.getTime()).toBeGreaterThanOrEqual(before + 60_000);
      expect(await row(s, n.dead)).toMatchObject({
        status: 'dead',
        lastError: 'poison',
        claimedBy: null,
        claimedUntil: null,
      });
      expect(await claim(s, randomUUID())).toEqual([]);
    },
  },
  {
    name: 'extendLease() moves the lease end to now + leaseMs on the database clock, only for the owner',
    async run(s) {
      await reset(s);
      const n = names('a', 'b');
      const owner = randomUUID();
      await insert(s, { messageId: n.a }, { messageId: n.b });
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      expect(await s.dialect.extendLease(s.dataSource.manager, s.table, randomUUID(), seqs, 600_000)).toBe(0);
      const before = await dbNow(s);
      expect(await s.dialect.extendLease(s.dataSource.manager, s.table, owner, seqs, 600_000)).toBe(2);
      const after = await dbNow(s);
      for (const id of [n.a, n.b]) {
        const held = (await row(s, id))!;
        expect(held).toMatchObject({ status: 'pending', claimedBy: owner, attempts: 1 });
        expect(held.claimedUntil!.getTime()).toBeGreaterThanOrEqual(before + 600_000);
        expect(held.claimedUntil!.getTime()).toBeLessThanOrEqual(after + 600_000);
      }
      // A row marked sent is no longer held: it is not extended.
      await s.dialect.markSent(s.dataSource.manager, s.table, owner, [seqs[0]]);
      expect(await s.dialect.extendLease(s.dataSource.manager, s.table, owner, seqs, 600_000)).toBe(1);
      expect(await s.dialect.extendLease(s.dataSource.manager, s.table, owner, [], 600_000)).toBe(0);
    },
  },
  {
    name: 'release() gives unstarted claims back: due at once, attempt uncounted, only for the owner',
    async run(s) {
      await reset(s);
      const n = names('a');
      const owner = randomUUID();
      await insert(s, { messageId: n.a });
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      expect(await s.dialect.release(s.dataSource.manager, s.table, randomUUID(), seqs)).toBe(0);
      expect(await row(s, n.a)).toMatchObject({ claimedBy: owner, attempts: 1 });
      expect(await s.dialect.release(s.dataSource.manager, s.table, owner, seqs)).toBe(1);
      expect(await row(s, n.a)).toMatchObject({ status: 'pending', claimedBy: null, claimedUntil: null, attempts: 0 });
      expect(await claim(s, randomUUID())).toEqual([expect.objectContaining({ messageId: n.a, attempts: 1 })]);
    },
  },
  {
    name: 'deleteSent() deletes published rows, only for the owner (a wrong owner deletes 0 rows)',
    async run(s) {
      await reset(s);
      const n = names('a', 'b', 'untouched');
      const owner = randomUUID();
      await insert(s, { messageId: n.a }, { messageId: n.b });
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      await insert(s, { messageId: n.untouched });
      expect(await s.dialect.deleteSent(s.dataSource.manager, s.table, randomUUID(), seqs)).toBe(0);
      expect(await s.dataSource.getRepository(OutboxMessage).count()).toBe(3);
      expect(await s.dialect.deleteSent(s.dataSource.manager, s.table, owner, seqs)).toBe(2);
      expect((await s.dataSource.getRepository(OutboxMessage).find()).map((r) => r.messageId)).toEqual([n.untouched]);
    },
  },
  {
    name: 'stats() counts pending, due, in-flight and dead rows and the age of the oldest pending row',
    async run(s) {
      await reset(s);
      const stats = () => s.dialect.stats(s.dataSource.manager, s.table);
      expect(await stats()).toEqual({ pending: 0, due: 0, inFlight: 0, dead: 0, oldestPendingAgeMs: 0 });
      const n = names('claimed', 'due1', 'due2', 'later', 'dead', 'sent');
      await insert(s, { messageId: n.claimed });
      await claim(s, randomUUID());
      await insert(s, { messageId: n.due1 }, { messageId: n.due2 }, { messageId: n.later, delay: 60_000 });
      await insert(s, { messageId: n.dead }, { messageId: n.sent });
      await update(s, [n.dead], { status: 'dead' });
      await update(s, [n.sent], { status: 'sent', sentAt: new Date() });
      const now = await dbNow(s);
      await update(s, [n.due2], { createdAt: new Date(now - 120_000) });
      const counted = await stats();
      expect(counted).toMatchObject({ pending: 4, due: 2, inFlight: 1, dead: 1 });
      expect(counted.oldestPendingAgeMs).toBeGreaterThanOrEqual(120_000);
      expect(counted.oldestPendingAgeMs).toBeLessThan(3_600_000);
    },
  },
  {
    name: 'requeueDead() makes the selected dead rows (all when none given) pending and due, attempts reset',
    async run(s) {
      await reset(s);
      const n = names('d1', 'd2', 'd3', 'pending');
      await insert(
        s,
        { messageId: n.d1 },
        { messageId: n.d2 },
        { messageId: n.d3 },
        { messageId: n.pending, delay: 60_000 },
      );
      await update(s, [n.d1, n.d2, n.d3], { status: 'dead', attempts: 5, lastError: 'poison' });
      const requeue = (selection?: string[]) => s.dialect.requeueDead(s.dataSource.manager, s.table, selection);
      expect(await requeue([])).toBe(0);
      expect(await requeue([n.pending])).toBe(0);
      expect(await requeue([n.d1])).toBe(1);
      expect(await row(s, n.d1)).toMatchObject({ status: 'pending', attempts: 0, claimedBy: null });
      expect(await row(s, n.d2)).toMatchObject({ status: 'dead', attempts: 5 });
      expect(ids(await claim(s, randomUUID()))).toEqual([n.d1]);
      expect(await requeue(undefined)).toBe(2);
      expect(ids(await claim(s, randomUUID()))).toEqual([n.d2, n.d3]);
      expect((await row(s, n.pending))!.status).toBe('pending');
    },
  },
  {
    name: 'purgeDead() deletes the selected dead rows (all when none given) and nothing else',
    async run(s) {
      await reset(s);
      const n = names('d1', 'd2', 'd3', 'pending', 'sent');
      await insert(
        s,
        { messageId: n.d1 },
        { messageId: n.d2 },
        { messageId: n.d3 },
        { messageId: n.pending },
        { messageId: n.sent },
      );
      await update(s, [n.d1, n.d2, n.d3], { status: 'dead' });
      await update(s, [n.sent], { status: 'sent', sentAt: new Date() });
      const purge = (selection?: string[]) => s.dialect.purgeDead(s.dataSource.manager, s.table, selection);
      expect(await purge([])).toBe(0);
      expect(await purge([n.pending, n.sent])).toBe(0);
      expect(await purge([n.d1])).toBe(1);
      expect(await row(s, n.d1)).toBeNull();
      expect(await purge(undefined)).toBe(2);
      const left = await s.dataSource.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(left.map((r) => r.messageId)).toEqual([n.pending, n.sent]);
    },
  },
  {
    name: 'deleteExpiredSent() deletes at most `limit` sent rows past retention, oldest first, and nothing else',
    async run(s) {
      await reset(s);
      const n = names('old1', 'old2', 'old3', 'recent', 'pending', 'dead');
      await insert(s, ...Object.values<string>(n).map((messageId) => ({ messageId })));
      const now = await dbNow(s);
      const hoursAgo = (h: number) => new Date(now - h * 3_600_000);
      await update(s, [n.old1], { status: 'sent', sentAt: hoursAgo(3) });
      await update(s, [n.old2], { status: 'sent', sentAt: hoursAgo(5) });
      await update(s, [n.old3], { status: 'sent', sentAt: hoursAgo(4) });
      await update(s, [n.recent], { status: 'sent', sentAt: new Date(now - 60_000) });
      await update(s, [n.dead], { status: 'dead', sentAt: hoursAgo(5) });
      await update(s, [n.pending], { sentAt: hoursAgo(5) });
      const sweep = (retentionMs: number, limit: number) =>
        s.dialect.deleteExpiredSent(s.dataSource.manager, s.table, retentionMs, limit);
      expect(await sweep(6 * 3_600_000, 10)).toBe(0);
      expect(await sweep(3_600_000, 2)).toBe(2);
      expect(await row(s, n.old2)).toBeNull();
      expect(await row(s, n.old3)).toBeNull();
      expect(await sweep(3_600_000, 2)).toBe(1);
      expect(await sweep(3_600_000, 2)).toBe(0);
      const left = await s.dataSource.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(left.map((r) => r.messageId)).toEqual([n.recent, n.pending, n.dead]);
    },
  },
  {
    name: 'prepare() is idempotent, and keyed inserts work after it',
    async run(s) {
      await reset(s);
      await s.dialect.prepare(s.dataSource.manager, s.table);
      await s.dialect.prepare(s.dataSource.manager, s.table);
      const n = names('a', 'b');
      await s.dataSource.transaction((tx) =>
        s.dialect.insert(tx, s.table, [
          { messageId: n.a, pattern: 'E', payload: '{}', headers: null, key: 'k-1' },
          { messageId: n.b, pattern: 'E', payload: '{}', headers: null, key: 'k-2' },
        ]),
      );
      expect(ids(await claim(s, randomUUID()))).toEqual([n.a, n.b]);
    },
  },
  {
    name: 'isUniqueViolation() recognizes a duplicate message id of one destination (and its index) and nothing else',
    async run(s) {
      await reset(s);
      const n = names('a');
      await insert(s, { messageId: n.a });
      // The same message id for another destination is another row of the message.
      await insert(s, { messageId: n.a, destination: 'handler:h' });
      const duplicate = await insert(s, { messageId: n.a }).then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(duplicate).toBeDefined();
      expect(s.dialect.isUniqueViolation(duplicate)).toBe(true);
      // The library names an index by name, table and columns (UniqueIndexRef): SQLite's error names only the
      // columns, so a bare index name (what the interface's signature declares) cannot be matched there.
      const index = {
        name: 'UQ_outbox_messages_message_destination',
        table: s.table,
        columns: ['message_id', 'destination'],
      };
      const otherIndex = { name: 'UQ_outbox_messages_pattern', table: s.table, columns: ['pattern'] };
      expect(s.dialect.isUniqueViolation(duplicate, index as never)).toBe(true);
      expect(s.dialect.isUniqueViolation(duplicate, otherIndex as never)).toBe(false);
      const other = await s.dataSource.query('SELECT * FROM no_such_table_here').then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(other).toBeDefined();
      expect(s.dialect.isUniqueViolation(other)).toBe(false);
      expect(s.dialect.isUniqueViolation(new Error('duplicate key'))).toBe(false);
    },
  },
  {
    name: 'dispose() is idempotent, and the dialect still works on the DataSource afterwards',
    async run(s) {
      await reset(s);
      await s.dialect.dispose(s.dataSource);
      await s.dialect.dispose(s.dataSource);
      const n = names('a');
      const owner = randomUUID();
      await insert(s, { messageId: n.a });
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      expect(await s.dialect.markSent(s.dataSource.manager, s.table, owner, seqs)).toBe(1);
    },
  },
  {
    name: 'markFailed() with history appends one attempt per held row (redacted, owner, publisher, counted) and keeps the newest `limit`',
    async run(s) {
      await reset(s);
      const n = names('a', 'b');
      await insert(s, { messageId: n.a }, { messageId: n.b });
      const fail = async (error: string, unreachable = false) => {
        const owner = randomUUID();
        const rows = await claim(s, owner);
        const failures = rows.map((r) => ({
          seq: r.seq,
          error,
          retryDelay: 0,
          dead: false,
          transportUnreachable: unreachable,
        }));
        expect(await s.dialect.markFailed(s.dataSource.manager, s.table, randomUUID(), failures, HISTORY)).toBe(0);
        expect(await s.dialect.markFailed(s.dataSource.manager, s.table, owner, failures, HISTORY)).toBe(2);
        return owner;
      };
      await fail('first');
      expect((await attemptsOf(s, n.a)).map((a) => a.error)).toEqual(['first']);
      await fail('broker amqp://user:hunter2@rabbit:5672 refused', true);
      const third = await fail('third');
      const kept = await attemptsOf(s, n.a);
      expect(kept.map((a) => [a.attempt, a.counted])).toEqual([
        [2, false],
        [2, true],
      ]);
      expect(kept[0].error).toBe('broker amqp://***@rabbit:5672 refused');
      expect(kept[1]).toMatchObject({ error: 'third', owner: third, publisher: 'host-a:42' });
      expect(kept[1].failedAt).toBeGreaterThan(Date.UTC(2020, 0, 1));
      expect(await attemptsOf(s, n.b)).toHaveLength(2);
      expect(await allAttempts(s)).toBe(4);
      const noHistory = randomUUID();
      const rows = await claim(s, noHistory);
      const failures = rows.map((r) => ({ seq: r.seq, error: 'x', retryDelay: 0, dead: true }));
      expect(
        await s.dialect.markFailed(s.dataSource.manager, s.table, noHistory, failures, { ...HISTORY, limit: 0 }),
      ).toBe(2);
      expect(await allAttempts(s)).toBe(4);
    },
  },
  {
    name: 'markFailed() stamps dead_at on the database clock for rows it marks dead, and requeueDead() clears it',
    async run(s) {
      await reset(s);
      const n = names('dead', 'retry');
      await insert(s, { messageId: n.dead }, { messageId: n.retry });
      const owner = randomUUID();
      const [dead, retry] = await claim(s, owner);
      const before = await dbNow(s);
      await s.dialect.markFailed(
        s.dataSource.manager,
        s.table,
        owner,
        [
          { seq: dead.seq, error: 'poison', retryDelay: 0, dead: true },
          { seq: retry.seq, error: 'later', retryDelay: 60_000, dead: false },
        ],
        HISTORY,
      );
      const deadAt = (await row(s, n.dead))!.deadAt!.getTime();
      expect(deadAt).toBeGreaterThanOrEqual(before);
      expect(deadAt).toBeLessThanOrEqual(await dbNow(s));
      expect((await row(s, n.retry))!.deadAt).toBeNull();
      expect(await s.dialect.requeueDead(s.dataSource.manager, s.table, [n.dead])).toBe(1);
      expect((await row(s, n.dead))!.deadAt).toBeNull();
    },
  },
  {
    name: 'listDead() lists matching dead rows newest death first (ties: higher seq), continuing strictly after `after`',
    async run(s) {
      await reset(s);
      const n = names('d1', 'd2', 'd3', 'd4', 'pending', 'sent');
      await insert(s, ...Object.values<string>(n).map((messageId) => ({ messageId })));
      await update(s, [n.d1], { status: 'dead', deadAt: new Date(3000) });
      await update(s, [n.d2, n.d3], { status: 'dead', deadAt: new Date(2000) });
      await update(s, [n.d4], { status: 'dead', deadAt: new Date(1000) });
      await update(s, [n.sent], { status: 'sent', sentAt: new Date() });
      const list = (limit: number, after?: { deadAt: number; seq: string }) =>
        s.dialect.listDead(s.dataSource.manager, s.table, { filter: {}, limit, after });
      const all = await list(10);
      expect(all.map((r) => r.messageId)).toEqual([n.d1, n.d3, n.d2, n.d4]);
      expect(all[1]).toMatchObject({ pattern: 'E', key: null, deadAt: 2000, attempts: 0, lastError: null });
      const seen: string[] = [];
      let after: { deadAt: number; seq: string } | undefined;
      for (;;) {
        const page = await list(1, after);
        if (page.length === 0) break;
        seen.push(page[0].messageId);
        after = { deadAt: page[0].deadAt, seq: page[0].seq };
      }
      expect(seen).toEqual([n.d1, n.d3, n.d2, n.d4]);
    },
  },
  {
    name: 'listDead() and countDead() apply each filter (ids, pattern, key, error text, death and creation times) to dead rows only',
    async run(s) {
      await reset(s);
      const n = names('a', 'b', 'c', 'pending');
      await insert(
        s,
        { messageId: n.a, pattern: 'Order', key: 'k1' },
        { messageId: n.b, pattern: 'Order', key: 'k2' },
        { messageId: n.c, pattern: 'Invoice', key: 'k1' },
        { messageId: n.pending, pattern: 'Order', key: 'k1' },
      );
      await update(s, [n.a], {
        status: 'dead',
        deadAt: new Date(1000),
        createdAt: new Date(100),
        lastError: 'Timeout 50% of the time',
      });
      await update(s, [n.b], {
        status: 'dead',
        deadAt: new Date(2000),
        createdAt: new Date(200),
        lastError: 'refused',
      });
      await update(s, [n.c], { status: 'dead', deadAt: new Date(3000), createdAt: new Date(300), lastError: null });
      await update(s, [n.pending], { lastError: 'timeout', createdAt: new Date(100) });
      const match = async (filter: DeadRowFilter) => {
        const listed = await s.dialect.listDead(s.dataSource.manager, s.table, { filter, limit: 10 });
        expect(await s.dialect.countDead(s.dataSource.manager, s.table, filter)).toBe(listed.length);
        return listed.map((r) => r.messageId).sort();
      };
      expect(await match({})).toEqual([n.a, n.b, n.c].sort());
      expect(await match({ messageIds: [n.a, n.pending] })).toEqual([n.a]);
      expect(await match({ messageIds: [] })).toEqual([]);
      expect(await match({ pattern: 'Order' })).toEqual([n.a, n.b].sort());
      expect(await match({ key: 'k1' })).toEqual([n.a, n.c].sort());
      expect(await match({ pattern: 'Order', key: 'k1' })).toEqual([n.a]);
      expect(await match({ errorContains: 'TIMEOUT' })).toEqual([n.a]);
      expect(await match({ errorContains: '50%' })).toEqual([n.a]);
      expect(await match({ errorContains: '5_%' })).toEqual([]);
      expect(await match({ deadSince: 2000 })).toEqual([n.b, n.c].sort());
      expect(await match({ deadBefore: 2000 })).toEqual([n.a]);
      expect(await match({ deadSince: 1500, deadBefore: 2500 })).toEqual([n.b]);
      expect(await match({ createdSince: 200, createdBefore: 300 })).toEqual([n.b]);
    },
  },
  {
    name: 'requeueDead() and purgeDead() by filter touch exactly the matching dead rows',
    async run(s) {
      await reset(s);
      const n = names('a', 'b', 'c', 'pending', 'sent');
      await insert(
        s,
        { messageId: n.a, pattern: 'Order' },
        { messageId: n.b, pattern: 'Order' },
        { messageId: n.c, pattern: 'Invoice' },
        { messageId: n.pending, pattern: 'Order', delay: 60_000 },
        { messageId: n.sent, pattern: 'Order' },
      );
      await update(s, [n.a], { status: 'dead', attempts: 3, deadAt: new Date(1000), lastError: 'refused' });
      await update(s, [n.b], { status: 'dead', attempts: 3, deadAt: new Date(2000), lastError: 'timeout' });
      await update(s, [n.c], { status: 'dead', attempts: 3, deadAt: new Date(2000), lastError: 'timeout' });
      await update(s, [n.sent], { status: 'sent', sentAt: new Date() });
      const m = s.dataSource.manager;
      expect(await s.dialect.requeueDead(m, s.table, { pattern: 'Order', errorContains: 'timeout' })).toBe(1);
      expect(await row(s, n.b)).toMatchObject({ status: 'pending', attempts: 0 });
      expect(await row(s, n.a)).toMatchObject({ status: 'dead', attempts: 3 });
      expect(await row(s, n.c)).toMatchObject({ status: 'dead', attempts: 3 });
      expect(await row(s, n.pending)).toMatchObject({ status: 'pending' });
      expect(await s.dialect.purgeDead(m, s.table, { pattern: 'Order' })).toBe(1);
      expect(await row(s, n.a)).toBeNull();
      expect(await s.dialect.purgeDead(m, s.table, { deadSince: 5000 })).toBe(0);
      const left = await s.dataSource.getRepository(OutboxMessage).find({ order: { seq: 'ASC' } });
      expect(left.map((r) => [r.messageId, r.status])).toEqual([
        [n.b, 'pending'],
        [n.c, 'dead'],
        [n.pending, 'pending'],
        [n.sent, 'sent'],
      ]);
    },
  },
  {
    name: "listAttempts() reads a message's history oldest first; deleting the message (purge, cleanup, deleteSent) deletes it",
    async run(s) {
      await reset(s);
      const n = names('purged', 'cleaned', 'deleted');
      await insert(s, { messageId: n.purged }, { messageId: n.cleaned }, { messageId: n.deleted });
      const m = s.dataSource.manager;
      for (const error of ['one', 'two']) {
        const owner = randomUUID();
        const rows = await claim(s, owner);
        await s.dialect.markFailed(
          m,
          s.table,
          owner,
          rows.map((r) => ({ seq: r.seq, error, retryDelay: 0, dead: false })),
          HISTORY,
        );
      }
      const purged = (await row(s, n.purged))!;
      expect(
        (await s.dialect.listAttempts(m, s.table, purged.seq)).map((a) => [a.attempt, a.error, a.counted]),
      ).toEqual([
        [1, 'one', true],
        [2, 'two', true],
      ]);
      expect(await allAttempts(s)).toBe(6);
      await update(s, [n.purged], { status: 'dead' });
      expect(await s.dialect.purgeDead(m, s.table, [n.purged])).toBe(1);
      expect(await s.dialect.listAttempts(m, s.table, purged.seq)).toEqual([]);
      expect(await allAttempts(s)).toBe(4);
      await update(s, [n.cleaned], { status: 'sent', sentAt: new Date((await dbNow(s)) - 120_000) });
      expect(await s.dialect.deleteExpiredSent(m, s.table, 60_000, 10)).toBe(1);
      expect(await allAttempts(s)).toBe(2);
      const owner = randomUUID();
      const seqs = (await claim(s, owner)).map((r) => r.seq);
      expect(await s.dialect.deleteSent(m, s.table, owner, seqs)).toBe(1);
      expect(await allAttempts(s)).toBe(0);
    },
  },
  REPLACE_DEAD_CHECK,
];

/** Runs every check of the contract as a jest test against the subject `getSubject` returns at run time. */
export function dialectContract(getSubject: () => DialectSubject): void {
  for (const check of DIALECT_CHECKS) {
    it(check.name, () => check.run(getSubject()));
  }
}

/** Runs the checks against `subject` and resolves with the names of those that failed. */
export async function failingChecks(
  subject: DialectSubject,
  checks: readonly DialectCheck[] = DIALECT_CHECKS,
): Promise<string[]> {
  const failed: string[] = [];
  for (const check of checks) {
    await check.run(subject).catch(() => failed.push(check.name));
  }
  return failed;
}
