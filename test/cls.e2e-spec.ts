import { Injectable } from '@nestjs/common';
import { Transactional, TransactionHost } from '@nestjs-cls/transactional';
import type { TransactionalAdapterTypeOrm } from '@nestjs-cls/transactional-adapter-typeorm';
import { AsyncLocalStorage } from 'node:async_hooks';
import { DataSource, EntityManager } from 'typeorm';
import {
  OnOutboxEvent,
  OutboxConfigurationError,
  OutboxMessage,
  OutboxNoTransactionError,
  OutboxService,
  OutboxTransactionContext,
  OutboxTransactionSource,
} from '../src';
import { resolveOutboxOptions } from '../src/outbox.options-validation';
import { clsTransactionalModule } from './fixtures/cls-transactional';
import { createOutboxTestingModule } from './fixtures/outbox-app';
import { TestOrder } from './fixtures/order.entity';
import { DATABASE_LABEL, DatabaseKind, servicesOf } from './helpers/databases';
import { useOutboxApp, useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** An app service that manages its transactions with @nestjs-cls/transactional only. */
@Injectable()
class OrdersService {
  constructor(
    private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>,
    private readonly outbox: OutboxService,
  ) {}

  @Transactional()
  async place(reference: string, fail = false): Promise<string> {
    const order = await this.txHost.tx.save(TestOrder, { reference, amount: 10 });
    const id = await this.outbox.emit('OrderPlaced', { orderId: order.id });
    if (fail) throw new Error('payment declined');
    return id;
  }

  /** Calls a @Transactional() method from inside another: both share one transaction. */
  @Transactional()
  async placeTwiceThenFail(): Promise<void> {
    await this.place('T-1');
    await this.place('T-2');
    throw new Error('second thoughts');
  }
}

const clsImports = [clsTransactionalModule(false)];

const kinds: DatabaseKind[] = ['sqlite', 'postgres'];

for (const kind of kinds) {
  describeWith(
    servicesOf(kind),
    `transactions: 'cls' (@nestjs-cls/transactional + TypeORM adapter) on ${DATABASE_LABEL[kind]}`,
    () => {
      let outbox: OutboxService;
      let orders: OrdersService;
      let txHost: TransactionHost<TransactionalAdapterTypeOrm>;
      let ds: DataSource;
      const fx = useOutboxApp(kind, {
        imports: clsImports,
        providers: [OrdersService],
        outbox: { transactions: 'cls', publisher: { enabled: false } },
      });

      beforeAll(() => {
        ({ outbox, dataSource: ds } = fx);
        orders = fx.app.get(OrdersService);
        txHost = fx.app.get(TransactionHost);
      });

      beforeEach(async () => {
        await ds.createQueryBuilder().delete().from(OutboxMessage).execute();
        await ds.getRepository(TestOrder).clear();
      });

      const counts = async () => ({
        orders: await ds.getRepository(TestOrder).count(),
        events: await ds.getRepository(OutboxMessage).count(),
      });

      it('emit() inside a @Transactional() method commits with the business row', async () => {
        const id = await orders.place('A-1');
        expect(await counts()).toEqual({ orders: 1, events: 1 });
        expect((await ds.getRepository(OutboxMessage).findOneByOrFail({ messageId: id })).pattern).toBe('OrderPlaced');
      });

      it('a @Transactional() method that throws after emit() rolls back the row and the event', async () => {
        await expect(orders.place('A-2', true)).rejects.toThrow('payment declined');
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      it('nested @Transactional() methods share one transaction: an outer throw rolls back every emit()', async () => {
        await expect(orders.placeTwiceThenFail()).rejects.toThrow('second thoughts');
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      it('outbox.manager is TransactionHost.tx inside txHost.withTransaction(), and a rollback drops the event', async () => {
        await expect(
          txHost.withTransaction(async () => {
            expect(outbox.inTransaction).toBe(true);
            expect(outbox.manager).toBe(txHost.tx);
            await outbox.manager.save(TestOrder, { reference: 'A-3', amount: 1 });
            await outbox.emit('OrderPlaced', {});
            throw new Error('abort');
          }),
        ).rejects.toThrow('abort');
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });

      it('outbox.transaction() opens a TransactionHost transaction that @Transactional() methods join', async () => {
        await expect(
          outbox.transaction(async (manager) => {
            expect(txHost.isTransactionActive()).toBe(true);
            expect(manager).toBe(txHost.tx);
            await orders.place('A-4');
            await outbox.emit('AlsoHere', {});
            throw new Error('undo all');
          }),
        ).rejects.toThrow('undo all');
        expect(await counts()).toEqual({ orders: 0, events: 0 });

        await outbox.transaction(async () => {
          await orders.place('A-5');
          await outbox.emit('AlsoHere', {});
        });
        expect(await counts()).toEqual({ orders: 1, events: 2 });
      });

      it('emit() and manager outside any transaction still throw OutboxNoTransactionError', async () => {
        await expect(outbox.emit('OrderPlaced', {})).rejects.toBeInstanceOf(OutboxNoTransactionError);
        expect(() => outbox.manager).toThrow(OutboxNoTransactionError);
        await txHost.withoutTransaction(async () => {
          await expect(outbox.emit('OrderPlaced', {})).rejects.toBeInstanceOf(OutboxNoTransactionError);
        });
        expect(await counts()).toEqual({ orders: 0, events: 0 });
      });
    },
  );
}

/** A transaction manager of the app's own, plugged in through the `OutboxTransactionSource` interface. */
class OwnTransactions implements OutboxTransactionSource {
  readonly name = 'own';
  readonly storage = new AsyncLocalStorage<OutboxTransactionContext>();
  initialized = false;
  init() {
    this.initialized = true;
  }
  current(dataSource: DataSource) {
    const context = this.storage.getStore();
    return context?.dataSource === dataSource ? context : undefined;
  }
  async run<T>(dataSource: DataSource, work: (manager: EntityManager) => Promise<T>): Promise<T> {
    const outer = this.current(dataSource);
    if (outer) return work(outer.manager);
    return dataSource.transaction((manager) =>
      this.storage.run({ dataSource, manager, afterCommit: [] }, () => work(manager)),
    );
  }
}

describe(`transactions: a custom OutboxTransactionSource on ${DATABASE_LABEL.sqlite}`, () => {
  const own = new OwnTransactions();
  const fx = useOutboxApp('sqlite', { outbox: { transactions: own, publisher: { enabled: false } } });

  it('is initialized at startup; emit() and manager join its transactions, which commit and roll back the event', async () => {
    expect(own.initialized).toBe(true);
    const { outbox, dataSource: ds } = fx;
    await own.run(ds, async (manager) => {
      expect(outbox.manager).toBe(manager);
      await outbox.emit('Kept', {});
    });
    await expect(
      outbox.transaction(async (manager) => {
        expect(own.storage.getStore()?.manager).toBe(manager);
        await outbox.emit('Dropped', {});
        throw new Error('roll back');
      }),
    ).rejects.toThrow('roll back');
    expect((await ds.getRepository(OutboxMessage).find()).map((m) => m.pattern)).toEqual(['Kept']);
  });
});

describe('transactions option validation (SQLite (better-sqlite3))', () => {
  const fx = useTestDatabase('sqlite');

  it("'cls' without ClsPluginTransactional fails at startup naming the fix", async () => {
    const moduleRef = await createOutboxTestingModule({
      db: fx.db,
      outbox: { transactions: 'cls', publisher: { enabled: false } },
    });
    const app = moduleRef.createNestApplication();
    try {
      const error = await app.init().then(
        () => undefined,
        (e: unknown) => e,
      );
      expect(error).toBeInstanceOf(OutboxConfigurationError);
      expect((error as Error).message).toMatch(/ClsPluginTransactional/);
    } finally {
      await app.close().catch(() => undefined);
    }
  });

  it.each([
    ['a misspelled name', 'nestjs-cls'],
    ['an object without current()/run()', {}],
  ])('%s → OutboxConfigurationError naming `transactions`', (_label, value) => {
    expect(() => resolveOutboxOptions({ client: 'BROKER', transactions: value as 'cls' })).toThrow(
      /option `transactions` must be 'builtin', 'cls' or an OutboxTransactionSource/,
    );
  });
});

/** An in-process handler that writes through @nestjs-cls/transactional's TransactionHost only. */
@Injectable()
class ClsProjection {
  runs = 0;

  constructor(private readonly txHost: TransactionHost<TransactionalAdapterTypeOrm>) {}

  @OnOutboxEvent('OrderPlaced')
  async project(payload: { orderId: number }) {
    this.runs++;
    await this.txHost.tx.save(TestOrder, { reference: `projected-${payload.orderId}`, amount: 0 });
    if (this.runs === 1) throw new Error('first run fails after its write');
  }
}

describe(`transactions: 'cls' with an in-process @OnOutboxEvent() handler on ${DATABASE_LABEL.sqlite}`, () => {
  const fx = useOutboxApp('sqlite', {
    logger: false,
    imports: clsImports,
    providers: [OrdersService, ClsProjection],
    outbox: {
      client: undefined,
      transactions: 'cls',
      publisher: { pollingInterval: 50 },
      retry: { initialDelay: 20, maxDelay: 50 },
    },
  });

  it("runs the handler in a TransactionHost transaction: its failed run's write rolls back, the retry's commits once", async () => {
    const id = await fx.app.get(OrdersService).place('CLS-1');
    const repo = fx.dataSource.getRepository(OutboxMessage);
    await waitFor(async () => (await repo.findOneByOrFail({ messageId: id })).status === 'sent', 'the message handled');
    const projected = await fx.dataSource.getRepository(TestOrder).countBy({ amount: 0 });
    expect(fx.app.get(ClsProjection).runs).toBe(2);
    expect(projected).toBe(1);
  });
});
