import { ChildProcess, execFile, spawn } from 'node:child_process';
import { mkdirSync, mkdtempSync, readFileSync, rmSync, symlinkSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { DataSource } from 'typeorm';
import { deleteQueue, RABBITMQ_URL, uniqueQueue } from './helpers/consumers';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, TestDatabase } from './helpers/databases';
import { buildAndPack, installPackedApp } from './helpers/packed-package';
import { freePort, waitFor } from './helpers/ports';
import {
  classSnippets,
  quickStartFiles,
  readDocumentation,
  ReadmeSnippet,
  readReadme,
  SNIPPET_PLACEHOLDERS,
  toReadmeLines,
} from './helpers/readme-snippets';
import { describeWith } from './helpers/services';

/**
 * The README tested as written. The quick start's ```ts blocks are copied out of README.md (each under the file
 * name its first line gives) into a temp app that has the packed package installed (built and packed as
 * test/package.e2e-spec.ts does), together with every other block of README.md, CONTRIBUTING.md and docs/*.md that
 * declares a full class (the rule is in test/helpers/readme-snippets.ts); a type error names the Markdown file
 * and line. `tsc` type-checks them all and compiles the app; the app then boots on a fresh PostgreSQL database and
 * RabbitMQ (a queue of its own) and takes a retried `POST /orders` and its event — and so again on MariaDB and on
 * SQLite, with only the connection lines of app.module.ts changed (its own migration included: the quick start works
 * as pasted on each).
 */
const run = promisify(execFile);

describeWith(
  ['postgres', 'mariadb', 'rabbitmq'],
  'README quick start, as written, on PostgreSQL + RabbitMQ, and on MariaDB and SQLite (packed package)',
  () => {
    let work: string;
    let app: string;
    let snippets: ReadmeSnippet[];
    let db: TestDatabase;
    let queue: string;
    let child: ChildProcess | undefined;
    let output = '';

    beforeAll(async () => {
      work = mkdtempSync(join(tmpdir(), 'outbox-readme-'));
      app = join(work, 'app');
      installPackedApp(app, buildAndPack(work), 'outbox-readme-app');
      const readme = readReadme();
      snippets = [
        ...quickStartFiles(readme),
        ...readDocumentation().flatMap((doc) => classSnippets(doc.text, doc.path)),
      ];
      for (const snippet of snippets) writeFileSync(join(app, snippet.file), snippet.code);
      writeFileSync(join(app, 'readme-placeholders.d.ts'), SNIPPET_PLACEHOLDERS);
      writeFileSync(
        join(app, 'tsconfig.json'),
        JSON.stringify({
          compilerOptions: {
            module: 'nodenext',
            moduleResolution: 'nodenext',
            target: 'es2022',
            strict: true,
            experimentalDecorators: true,
            emitDecoratorMetadata: true,
            skipLibCheck: true,
            types: ['node'],
            rootDir: '.',
            outDir: 'dist',
          },
          include: ['*.ts'],
        }),
      );
      db = await createTestDatabase('postgres');
      queue = uniqueQueue('readme-orders');
    }, 180_000);

    /** Stops the app of the last boot: SIGTERM, then SIGKILL after 10 s. */
    async function stopApp() {
      if (child && child.exitCode === null) {
        const exited = new Promise((resolve) => child!.once('exit', resolve));
        child.kill('SIGTERM');
        let timer: NodeJS.Timeout | undefined;
        await Promise.race([exited, new Promise((resolve) => (timer = setTimeout(resolve, 10_000)))]);
        clearTimeout(timer);
        if (child.exitCode === null) child.kill('SIGKILL');
      }
      child = undefined;
    }

    afterAll(async () => {
      await stopApp();
      await db?.drop();
      if (queue) await deleteQueue(queue);
      if (work) rmSync(work, { recursive: true, force: true });
    });

    it('finds the quick start files and the class snippets', () => {
      const files = snippets.map((s) => s.file);
      for (const file of [
        'entities.ts',
        'app.module.ts',
        'orders.service.ts',
        'orders.controller.ts',
        'order-placed.consumer.ts',
        'main.ts',
      ]) {
        expect(files).toContain(file);
      }
      // docs/: idempotency keys (HTTP + messages), nestjs-cls, health, OpenTelemetry declare a full class each.
      const sources = snippets.filter((s) => /-L\d+\.ts$/.test(s.file)).map((s) => s.source);
      for (const source of [
        'docs/idempotency.md',
        'docs/transactions-cls.md',
        'docs/health.md',
        'docs/events-and-tracing.md',
      ]) {
        expect(sources).toContain(source);
      }
      expect(sources.length).toBeGreaterThanOrEqual(5);
    });

    it('type-checks the quick start and every docs snippet declaring a class (tsc --strict, nodenext)', async () => {
      const tsc = require.resolve('typescript/bin/tsc');
      try {
        await run(process.execPath, [tsc, '-p', 'tsconfig.json'], { cwd: app });
      } catch (error) {
        const { stdout, stderr } = error as { stdout?: string; stderr?: string };
        throw new Error(
          `README/docs snippets do not type-check:\n${toReadmeLines(`${stdout ?? ''}${stderr ?? ''}`, snippets)}`,
        );
      }
    });

    /**
     * The quick start on another database, as a user would switch it: only the connection lines of app.module.ts
     * change (MySQL/MariaDB: `type`, the URL; SQLite: `type` and a file). Its own files only, compiled apart.
     */
    async function variant(kind: DatabaseKind): Promise<string> {
      if (kind === 'postgres') return app;
      const dir = join(work, `app-${kind}`);
      mkdirSync(dir);
      symlinkSync(join(app, 'node_modules'), join(dir, 'node_modules'));
      writeFileSync(join(dir, 'tsconfig.json'), readFileSync(join(app, 'tsconfig.json')));
      const connection = /type: 'postgres',\n(\s*)url: (process\.env\.DATABASE_URL \?\? '[^']*'),/;
      for (const snippet of quickStartFiles(readReadme())) {
        let code = snippet.code;
        if (snippet.file === 'app.module.ts') {
          expect(code).toMatch(connection);
          code = code.replace(connection, (_, indent: string, url: string) =>
            kind === 'mariadb'
              ? `type: 'mariadb',\n${indent}url: ${url},`
              : `type: 'better-sqlite3',\n${indent}database: process.env.DATABASE_URL ?? 'shop.sqlite',`,
          );
        }
        writeFileSync(join(dir, snippet.file), code);
      }
      await run(process.execPath, [require.resolve('typescript/bin/tsc'), '-p', 'tsconfig.json'], { cwd: dir });
      return dir;
    }

    function databaseUrl(test: TestDatabase): string {
      const o = test.options as { host: string; port: number; username: string; database: string };
      if (test.kind === 'sqlite') return o.database;
      return `${test.kind === 'postgres' ? 'postgres' : 'mysql'}://${o.username}@${o.host}:${o.port}/${o.database}`;
    }

    for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
      it(`boots on ${DATABASE_LABEL[kind]}; a retried POST /orders is replayed with one order row; its OrderPlaced is consumed once`, async () => {
        const testDb = kind === 'postgres' ? db : await createTestDatabase(kind);
        const queueOf = kind === 'postgres' ? queue : uniqueQueue(`readme-orders-${kind}`);
        output = '';
        try {
          const dir = await variant(kind);
          const port = await freePort();
          child = spawn(process.execPath, [join('dist', 'main.js')], {
            cwd: dir,
            env: {
              ...process.env,
              PORT: String(port),
              DATABASE_URL: databaseUrl(testDb),
              RABBITMQ_URL,
              RABBITMQ_QUEUE: queueOf,
              NO_COLOR: '1', // the app's log, shown when an assertion fails, without colour codes
            },
            stdio: ['ignore', 'pipe', 'pipe'],
          });
          child.stdout!.on('data', (chunk) => (output += chunk));
          child.stderr!.on('data', (chunk) => (output += chunk));
          await retriedOrder(port, testDb);
        } finally {
          await stopApp();
          if (kind !== 'postgres') {
            await testDb.drop();
            await deleteQueue(queueOf);
          }
        }
      });
    }

    async function retriedOrder(port: number, testDb: TestDatabase) {
      const url = `http://127.0.0.1:${port}/orders`;
      try {
        await waitFor(
          async () => {
            if (child!.exitCode !== null) throw new Error(`the app exited with ${child!.exitCode}`);
            return fetch(url).then(
              () => true,
              () => false,
            );
          },
          'the quick start app to answer HTTP',
          60_000,
        );
      } catch (error) {
        throw new Error(`${(error as Error).message}\n--- app output ---\n${output}`);
      }

      const post = () =>
        fetch(url, {
          method: 'POST',
          headers: { 'Content-Type': 'application/json', 'Idempotency-Key': 'order-1' },
          body: JSON.stringify({ product: 'tea', amount: 25 }),
        });
      const first = await post();
      const firstBody = await first.text();
      expect({ status: first.status, body: firstBody, output: first.status === 201 ? '' : output }).toEqual({
        status: 201,
        body: expect.any(String),
        output: '',
      });
      expect(first.headers.get('idempotent-replayed')).toBeNull();
      expect(JSON.parse(firstBody)).toEqual({ id: expect.any(Number), product: 'tea', amount: 25 });
      const retry = await post();
      expect(retry.status).toBe(201);
      expect(retry.headers.get('idempotent-replayed')).toBe('true');
      expect(await retry.text()).toBe(firstBody);

      const check = new DataSource(testDb.options);
      await check.initialize();
      try {
        expect(await check.query('SELECT product, amount FROM orders')).toEqual([{ product: 'tea', amount: 25 }]);
        const total = async () => Number((await check.query('SELECT total FROM revenue WHERE id = 1'))[0]?.total);
        await waitFor(
          async () => (await total()) === 25,
          'the consumer to apply OrderPlaced',
          60_000,
          async () => `revenue total ${await total()}\n--- app output ---\n${output}`,
        );
        await waitFor(
          async () =>
            (await check.query(`SELECT status FROM outbox_messages`)).every(
              (r: { status: string }) => r.status === 'sent',
            ),
          'the outbox row to be marked sent',
        );
        // One event for the two requests (the retry was replayed, not re-run), applied once by the consumer.
        expect(await check.query('SELECT pattern, status FROM outbox_messages')).toEqual([
          { pattern: 'OrderPlaced', status: 'sent' },
        ]);
        expect(await total()).toBe(25);
      } finally {
        await check.destroy();
      }
    }
  },
);
