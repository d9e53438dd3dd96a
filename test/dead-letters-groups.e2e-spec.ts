import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage } from '../src';
import { OutboxDeadLetterQueryError } from '../src/errors';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { describeWith } from './helpers/services';

const PER_SHAPE = 1000;

/**
 * Three error shapes, each varying per message (ids, numbers, UUIDs, quoted values, a stack with varying lines
 * of frameworks), so that only the normalisation puts each shape's rows in one group.
 */
const SHAPES: Record<'a' | 'b' | 'c', (i: number) => string> = {
  a: (i) => `OutboxPublishTimeoutError: order ${i} failed after ${i * 7}ms`,
  b: (i) =>
    `QueryFailedError: duplicate key value "order-${i}" for id ${crypto.randomUUID()} (token 01J${String(i).padStart(
      20,
      '0',
    )})`,
  c: (i) =>
    `TypeError: Cannot read properties of undefined (reading 'total${i % 3}')\n` +
    `    at Object.next (/app/node_modules/rxjs/dist/cjs/internal/Subscriber.js:${i}:10)\n` +
    `    at InvoiceHandler.handle (/app/src/invoices/invoice.handler.ts:42:17)\n` +
    `    at process.processTicksAndRejections (node:internal/process/task_queues:${i}:5)`,
};

for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  describeWith(servicesOf(kind), `Dead-letter failure groups on ${DATABASE_LABEL[kind]}`, () => {
    const fx = useTestDatabase(kind);
    let app: INestApplication;
    let deadLetters: OutboxDeadLetters;

    beforeAll(async () => {
      app = await fx.start({ logger: false, outbox: { publisher: { enabled: false } } });
      deadLetters = app.get(OutboxDeadLetters);
      const rows: Array<Partial<OutboxMessage>> = [];
      for (const [shape, error] of Object.entries(SHAPES)) {
        for (let i = 0; i < PER_SHAPE; i++) {
          rows.push({
            messageId: `${shape}-${i}`,
            // Patterns cut across the shapes: a group is a cause, not a pattern.
            pattern: i % 2 === 0 ? 'OrderPlaced' : 'InvoiceIssued',
            payload: '{}',
            status: 'dead',
            attempts: 5,
            availableAt: new Date(1_000_000),
            createdAt: new Date(1_000_000 + i),
            deadAt: new Date(2_000_000 + i),
            lastError: error(i),
          } as Partial<OutboxMessage>);
        }
      }
      const repository = app.get(DataSource).getRepository(OutboxMessage);
      for (let i = 0; i < rows.length; i += 250) await repository.insert(rows.slice(i, i + 250) as never);
    }, 120_000);

    it(`groups 3 error shapes × ${PER_SHAPE} dead rows exactly (${DATABASE_LABEL[kind]})`, async () => {
      const { groups, scanned, complete } = await deadLetters.groups();
      expect({ scanned, complete }).toEqual({ scanned: 3 * PER_SHAPE, complete: true });
      expect(groups.map((g) => [g.errorClass, g.message, g.frame, g.count, g.firstSeen, g.lastSeen]).sort()).toEqual(
        [
          ['OutboxPublishTimeoutError', 'order <n> failed after <n>ms', null, PER_SHAPE, 2_000_000, 2_000_999],
          [
            'QueryFailedError',
            'duplicate key value <str> for id <uuid> (token <id>)',
            null,
            PER_SHAPE,
            2_000_000,
            2_000_999,
          ],
          [
            'TypeError',
            'Cannot read properties of undefined (reading <str>)',
            'InvoiceHandler.handle (/app/src/invoices/invoice.handler.ts:42:17)',
            PER_SHAPE,
            2_000_000,
            2_000_999,
          ],
        ].sort(),
      );
      for (const group of groups) {
        expect(group.group).toMatch(/^[0-9a-f]{16}$/);
        expect(group.patterns.sort()).toEqual(['InvoiceIssued', 'OrderPlaced']);
        expect(await deadLetters.count({ group: group.group })).toBe(PER_SHAPE);
      }
      // A filter narrows the rows grouped; the counts stay exact.
      const orders = await deadLetters.groups({ pattern: 'OrderPlaced' });
      expect(orders.groups.map((g) => g.count)).toEqual([PER_SHAPE / 2, PER_SHAPE / 2, PER_SHAPE / 2]);
      expect((await deadLetters.groups({ limit: 1 })).groups).toHaveLength(1);
    });

    it(`pages one group's messages, and refuses a malformed group (${DATABASE_LABEL[kind]})`, async () => {
      const { groups } = await deadLetters.groups();
      const timeouts = groups.find((g) => g.errorClass === 'OutboxPublishTimeoutError')!;
      const seen: string[] = [];
      let cursor: string | null = null;
      do {
        const page: Awaited<ReturnType<OutboxDeadLetters['page']>> = await deadLetters.page({
          group: timeouts.group,
          limit: 300,
          cursor,
        });
        seen.push(...page.items.map((m) => m.messageId));
        cursor = page.nextCursor;
      } while (cursor);
      expect(seen).toHaveLength(PER_SHAPE);
      expect(seen.every((id) => id.startsWith('a-'))).toBe(true);
      expect(new Set(seen).size).toBe(PER_SHAPE);
      await expect(deadLetters.count({ group: 'not-a-group' })).rejects.toThrow(OutboxDeadLetterQueryError);
      await expect(deadLetters.requeue({ group: 'ABC' })).rejects.toThrow(/16 hex digits/);
      await expect(deadLetters.groups({ group: timeouts.group } as never)).rejects.toThrow(
        /unknown filter field group/,
      );
      expect(await deadLetters.count({ group: '0000000000000000' })).toBe(0);
    });

    it(`requeues one group, touching only its rows; purges another (${DATABASE_LABEL[kind]})`, async () => {
      const { groups } = await deadLetters.groups();
      const byClass = Object.fromEntries(groups.map((g) => [g.errorClass, g.group]));
      expect(await deadLetters.requeue({ group: byClass.QueryFailedError })).toBe(PER_SHAPE);
      const repository = app.get(DataSource).getRepository(OutboxMessage);
      const rows = await repository.find({ select: { messageId: true, status: true, attempts: true } });
      const requeued = rows.filter((r) => r.status === 'pending');
      expect(requeued).toHaveLength(PER_SHAPE);
      expect(requeued.every((r) => r.messageId.startsWith('b-') && r.attempts === 0)).toBe(true);
      expect(rows.filter((r) => r.status === 'dead')).toHaveLength(2 * PER_SHAPE);
      expect((await deadLetters.groups()).groups.map((g) => g.errorClass).sort()).toEqual([
        'OutboxPublishTimeoutError',
        'TypeError',
      ]);

      // A group combines with the filter: only the OrderPlaced half of the TypeError group is purged.
      expect(await deadLetters.purge({ group: byClass.TypeError, pattern: 'OrderPlaced' })).toBe(PER_SHAPE / 2);
      expect(await deadLetters.count({ group: byClass.TypeError })).toBe(PER_SHAPE / 2);
      expect(await deadLetters.count({ group: byClass.OutboxPublishTimeoutError })).toBe(PER_SHAPE);
      expect(await repository.count()).toBe(3 * PER_SHAPE - PER_SHAPE / 2);
    });
  });
}
