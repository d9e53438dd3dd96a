import { execFile } from 'node:child_process';
import { mkdtempSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { promisify } from 'node:util';
import { buildAndPack, installPackedApp } from './helpers/packed-package';

/**
 * The package as users get it: `scripts/build.mjs` (what `npm run build` runs) builds into a temp folder (never
 * the shared dist/), `npm pack` packs it, the tarball is unpacked into a temp app's node_modules the way npm
 * installs it, and the app's other packages (the peers) are symlinks to this repo's node_modules. From there a
 * CommonJS app `require()`s it and an ES module app `import`s it; each boots Nest on SQLite and runs
 * `outbox.transaction(() => outbox.emit(…))`, and an `@Idempotent()` route whose `@Exclude()`d field must not be stored
 * (class-transformer, an optional peer, is loaded by the build itself). Each also loads `nestjs-outbox/testing` and
 * `nestjs-outbox/console` from that build. A TypeScript consumer type-checks against both typings of the three entries.
 */
const run = promisify(execFile);

const APP_BODY = (format: 'cjs' | 'esm') => `
class Account {
  constructor() {
    this.id = 7;
    this.secret = 'never stored';
  }
}
Exclude()(Account.prototype, 'secret');
class AccountsController {
  create() {
    return new Account();
  }
}
const create = Object.getOwnPropertyDescriptor(AccountsController.prototype, 'create');
Post()(AccountsController.prototype, 'create', create);
Idempotent()(AccountsController.prototype, 'create', create);
Controller('accounts')(AccountsController);

async function main() {
  class AppModule {}
  Module({
    controllers: [AccountsController],
    imports: [
      TypeOrmModule.forRoot({ type: 'better-sqlite3', database: process.env.DB_FILE, autoLoadEntities: true, synchronize: true }),
      ClientsModule.register([{ name: 'BROKER', transport: Transport.TCP, options: { port: 1 } }]),
      OutboxModule.forRoot({ client: 'BROKER', publisher: { enabled: false } }),
    ],
  })(AppModule);
  const app = await NestFactory.create(AppModule, { logger: false });
  await app.listen(0, '127.0.0.1');
  const outbox = app.get(OutboxService);
  // @Idempotent() stores what the client receives through class-transformer (loaded from this build).
  const url = 'http://127.0.0.1:' + app.getHttpServer().address().port + '/accounts';
  const post = () => fetch(url, { method: 'POST', headers: { 'Idempotency-Key': 'k1' } });
  const created = await post();
  const replayed = await post();
  const IdempotencyRecord = outboxEntities()[3];
  const record = await app.get(DataSource).getRepository(IdempotencyRecord).findOneByOrFail({ key: 'k1' });
  const idempotent = { created: created.status, replayed: [replayed.status, replayed.headers.get('idempotent-replayed'), await replayed.json()], stored: JSON.parse(record.responseBody) };
  const id = await outbox.transaction(() => outbox.emit('PackageSmoke', { format: '${format}' }));
  const failed = await outbox
    .transaction(async () => {
      await outbox.emit('RolledBack', {});
      throw new Error('roll back');
    })
    .catch((error) => error.message);
  let outside;
  try {
    await outbox.emit('Outside', {});
  } catch (error) {
    outside = error instanceof OutboxNoTransactionError ? error.name : String(error);
  }
  const rows = await app.get(DataSource).getRepository(OutboxMessage).find();
  await app.close();
  const nest = JSON.parse(readFileSync(join(dirname(NEST_CORE), 'package.json'), 'utf8')).version;
  console.log(JSON.stringify({ idempotent, id, failed, outside, rows: rows.map((r) => ({ messageId: r.messageId, pattern: r.pattern, payload: JSON.parse(r.payload) })), resolved: RESOLVED, testing: TESTING, testingKit: [typeof flushOutbox, typeof deliverEveryMessageTwice, typeof checkIdempotencyContract], console: CONSOLE, consoleModule: typeof OutboxConsoleModule.forRoot, nest, node: process.version }));
}
main().catch((error) => {
  console.error(error);
  process.exit(1);
});
`;

const CJS_APP = `'use strict';
require('reflect-metadata');
const { Module } = require('@nestjs/common');
const { NestFactory } = require('@nestjs/core');
const { ClientsModule, Transport } = require('@nestjs/microservices');
const { TypeOrmModule } = require('@nestjs/typeorm');
const { DataSource } = require('typeorm');
const { Controller, Post } = require('@nestjs/common');
const { Exclude } = require('class-transformer');
const { Idempotent, OutboxModule, OutboxService, OutboxMessage, OutboxNoTransactionError, outboxEntities } = require('nestjs-outbox');
const { readFileSync } = require('node:fs');
const { dirname, join } = require('node:path');
const RESOLVED = require.resolve('nestjs-outbox');
const NEST_CORE = require.resolve('@nestjs/core');
const { flushOutbox, deliverEveryMessageTwice, checkIdempotencyContract } = require('nestjs-outbox/testing');
const TESTING = require.resolve('nestjs-outbox/testing');
const { OutboxConsoleModule } = require('nestjs-outbox/console');
const CONSOLE = require.resolve('nestjs-outbox/console');
${APP_BODY('cjs')}`;

const ESM_APP = `import 'reflect-metadata';
import { Module } from '@nestjs/common';
import { NestFactory } from '@nestjs/core';
import { ClientsModule, Transport } from '@nestjs/microservices';
import { TypeOrmModule } from '@nestjs/typeorm';
import { DataSource } from 'typeorm';
import { Controller, Post } from '@nestjs/common';
import { Exclude } from 'class-transformer';
import { Idempotent, OutboxModule, OutboxService, OutboxMessage, OutboxNoTransactionError, outboxEntities } from 'nestjs-outbox';
import { readFileSync } from 'node:fs';
import { dirname, join } from 'node:path';
import { fileURLToPath } from 'node:url';
const RESOLVED = import.meta.resolve('nestjs-outbox');
const NEST_CORE = fileURLToPath(import.meta.resolve('@nestjs/core'));
import { flushOutbox, deliverEveryMessageTwice, checkIdempotencyContract } from 'nestjs-outbox/testing';
const TESTING = import.meta.resolve('nestjs-outbox/testing');
import { OutboxConsoleModule } from 'nestjs-outbox/console';
const CONSOLE = import.meta.resolve('nestjs-outbox/console');
${APP_BODY('esm')}`;

/**
 * Fails to compile if a type from the package resolved to `any` (an unresolved import inside its .d.ts files
 * makes it `any`, and then the `@ts-expect-error` lines have no error to expect).
 */
const TYPES_CHECK = `
import { OutboxModule, OutboxService } from 'nestjs-outbox';
import type { OutboxModuleOptions } from 'nestjs-outbox';
import { OutboxConsoleModule } from 'nestjs-outbox/console';
import type { OutboxConsoleOptions } from 'nestjs-outbox/console';
import { flushOutbox } from 'nestjs-outbox/testing';
import type { DynamicModule } from '@nestjs/common';
type EmitOptions = NonNullable<Parameters<OutboxService['emit']>[2]>;
// @ts-expect-error a number is not an OutboxService
export const notAService: OutboxService = 5;
// @ts-expect-error EmitOptions.manager is a TypeORM EntityManager, not a number
export const notAManager: EmitOptions = { manager: 5 };
// @ts-expect-error retry.maxAttempts is a number (an option sub-type reached as an indexed type)
export const badRetry: OutboxModuleOptions['retry'] = { maxAttempts: 'x' };
// @ts-expect-error the console's sampleInterval is a number
export const badConsole: OutboxConsoleOptions = { sampleInterval: 'x' };
export const consoleModule: DynamicModule = OutboxConsoleModule.forRoot({ allowUnguarded: true });
export const flush: (app: never) => Promise<number> = flushOutbox;
// @ts-expect-error batchSize is a number
export const badOption: DynamicModule = OutboxModule.forRoot({ client: 'BROKER', publisher: { batchSize: 'x' } });
export const module: DynamicModule = OutboxModule.forRoot({ client: 'BROKER' });
export async function emit(outbox: OutboxService): Promise<string> {
  return outbox.transaction(() => outbox.emit('Typed', { ok: true }, { key: 'k' }));
}
`;

describe('nestjs-outbox as a packed package (npm pack), CommonJS and ESM, on SQLite (better-sqlite3)', () => {
  let work: string;
  let app: string;
  let packedFiles: string[];

  beforeAll(async () => {
    work = mkdtempSync(join(tmpdir(), 'outbox-pkg-'));
    const packed = buildAndPack(work);
    packedFiles = packed.files;
    app = join(work, 'app');
    installPackedApp(app, packed);
    writeFileSync(join(app, 'app.cjs'), CJS_APP);
    writeFileSync(join(app, 'app.mjs'), ESM_APP);
    writeFileSync(join(app, 'types.mts'), TYPES_CHECK);
    writeFileSync(join(app, 'types.cts'), TYPES_CHECK);
  }, 180_000);

  afterAll(() => {
    if (work) rmSync(work, { recursive: true, force: true });
  });

  it('packs both builds with their typings and format markers, and no tests or sources', () => {
    for (const file of [
      'package.json',
      'dist/cjs/index.js',
      'dist/cjs/index.d.ts',
      'dist/cjs/package.json',
      'dist/esm/index.js',
      'dist/esm/index.d.ts',
      'dist/esm/package.json',
      'dist/cjs/testing/index.js',
      'dist/esm/testing/index.js',
      'dist/esm/testing/index.d.ts',
      'dist/cjs/console/index.js',
      'dist/cjs/console/index.d.ts',
      'dist/esm/console/index.js',
      'dist/esm/console/index.d.ts',
    ]) {
      expect(packedFiles).toContain(file);
    }
    expect(packedFiles.filter((f) => f.startsWith('src/') || f.startsWith('test/') || /\.spec\./.test(f))).toEqual([]);
  });

  it.each([
    ['a CommonJS app (require)', 'app.cjs', 'cjs'],
    ['an ES module app (import)', 'app.mjs', 'esm'],
  ])(
    '%s loads its build and commits transaction + emit, rolls back on throw; @Idempotent() stores responses through class-transformer',
    async (_label, file, format) => {
      const dbFile = join(work, `${format}.sqlite`);
      const { stdout } = await run(process.execPath, [file], { cwd: app, env: { ...process.env, DB_FILE: dbFile } });
      const result = JSON.parse(stdout.trim().split('\n').pop()!);
      expect(result.resolved).toContain(`/node_modules/nestjs-outbox/dist/${format}/index.js`);
      expect(result.testing).toContain(`/node_modules/nestjs-outbox/dist/${format}/testing/index.js`);
      expect(result.testingKit).toEqual(['function', 'function', 'function']);
      expect(result.console).toContain(`/node_modules/nestjs-outbox/dist/${format}/console/index.js`);
      expect(result.consoleModule).toBe('function');
      expect(result.failed).toBe('roll back');
      expect(result.outside).toBe('OutboxNoTransactionError');
      expect(result.rows).toEqual([{ messageId: result.id, pattern: 'PackageSmoke', payload: { format } }]);
      // class-transformer was loaded by this build: the @Exclude()d field was neither stored nor replayed.
      expect(result.idempotent).toEqual({ created: 201, replayed: [201, 'true', { id: 7 }], stored: { id: 7 } });
      console.log(`package smoke (${format}): Nest ${result.nest} on Node ${result.node}`);
      // The Nest 12 CI job (.ci/nest12.sh) sets these, so it fails if it did not really run on Nest 12 / Node 24.
      if (process.env.EXPECT_NEST_MAJOR) expect(result.nest.split('.')[0]).toBe(process.env.EXPECT_NEST_MAJOR);
      if (process.env.EXPECT_NODE_MAJOR)
        expect(result.node).toMatch(new RegExp(`^v${process.env.EXPECT_NODE_MAJOR}\\.`));
    },
  );

  it('type-checks a TypeScript consumer against the ESM and the CommonJS typings (moduleResolution nodenext)', async () => {
    const tsc = require.resolve('typescript/bin/tsc');
    const args = [
      '--noEmit',
      '--strict',
      '--module',
      'nodenext',
      '--moduleResolution',
      'nodenext',
      '--target',
      'es2022',
      '--skipLibCheck',
      '--types',
      'node',
    ];
    await expect(run(process.execPath, [tsc, ...args, 'types.mts', 'types.cts'], { cwd: app })).resolves.toBeDefined();
  });
});
