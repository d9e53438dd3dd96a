import type { INestApplication } from '@nestjs/common';
import { DataSource } from 'typeorm';
import { OutboxService } from '../../src';
import { createTestDatabase, DatabaseKind, TestDatabase } from './databases';
import { startOutboxApp, StartOutboxAppOptions } from './outbox-test-app';

/** A database owned by the fixture, and the apps and resources started on it. */
export interface E2eFixture {
  /** The fresh database of this suite (or of this test, with `per: 'test'`). */
  readonly db: TestDatabase;
  /** Boots an app on the database; the fixture closes it at teardown unless the test already did. */
  start(options?: StartOutboxAppOptions): Promise<INestApplication>;
  /**
   * Registers a cleanup (a consumer to close, a queue to delete, …) run at teardown after the apps are closed,
   * last registered first, before the database is dropped.
   */
  defer(cleanup: () => unknown): void;
}

export interface UseTestDatabaseOptions {
  /** 'suite': one database for the describe block (beforeAll/afterAll); 'test': one per test. Default 'suite'. */
  per?: 'suite' | 'test';
}

/**
 * Registers the jest hooks that create a unique database of `kind` before the suite (or each test) and, after it,
 * close the apps started with `start()`, run the deferred cleanups and drop the database. Every step of the
 * teardown runs even when an earlier one fails; the first failure is reported.
 */
export function useTestDatabase(kind: DatabaseKind, { per = 'suite' }: UseTestDatabaseOptions = {}): E2eFixture {
  let db: TestDatabase | undefined;
  let apps: INestApplication[] = [];
  let cleanups: Array<() => unknown> = [];
  const fixture: E2eFixture = {
    get db() {
      if (!db) throw new Error(`The ${kind} test database is used before the fixture's before hook created it`);
      return db;
    },
    async start(options) {
      const app = await startOutboxApp(fixture.db, options);
      apps.push(app);
      return app;
    },
    defer(cleanup) {
      cleanups.push(cleanup);
    },
  };
  const setUp = async () => {
    db = await createTestDatabase(kind);
  };
  const tearDown = async () => {
    const steps = [...apps.reverse().map((app) => () => app.close()), ...cleanups.reverse(), () => db?.drop()];
    apps = [];
    cleanups = [];
    let failure: unknown;
    for (const step of steps) {
      try {
        await step();
      } catch (error) {
        failure ??= error;
      }
    }
    db = undefined;
    if (failure) throw failure;
  };
  if (per === 'test') {
    beforeEach(setUp);
    afterEach(tearDown);
  } else {
    beforeAll(setUp);
    afterAll(tearDown);
  }
  return fixture;
}

/** A suite's database with one app booted on it before the tests. */
export interface OutboxAppFixture extends E2eFixture {
  readonly app: INestApplication;
  /** The app's DataSource. */
  readonly dataSource: DataSource;
  /** The app's OutboxService. */
  readonly outbox: OutboxService;
}

/**
 * `useTestDatabase(kind)` plus one app booted in `beforeAll` with the options `setup` returns (it may start
 * consumers first and `defer` their cleanup), so that a spec states only its scenario.
 */
export function useOutboxApp(
  kind: DatabaseKind,
  setup: StartOutboxAppOptions | ((fixture: E2eFixture) => StartOutboxAppOptions | Promise<StartOutboxAppOptions>) = {},
): OutboxAppFixture {
  const base = useTestDatabase(kind);
  let app: INestApplication | undefined;
  beforeAll(async () => {
    app = await base.start(typeof setup === 'function' ? await setup(base) : setup);
  });
  const started = () => {
    if (!app) throw new Error(`The ${kind} outbox app is used before the fixture's beforeAll started it`);
    return app;
  };
  return {
    get db() {
      return base.db;
    },
    start: (options) => base.start(options),
    defer: (cleanup) => base.defer(cleanup),
    get app() {
      return started();
    },
    get dataSource() {
      return started().get(DataSource);
    },
    get outbox() {
      return started().get(OutboxService);
    },
  };
}
