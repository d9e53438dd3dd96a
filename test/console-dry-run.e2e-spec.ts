import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { OutboxDeadLetters, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { uniqueQueue } from './helpers/consumers';
import { BROKER_SECRET, CONSOLE_TOKEN, FailingSerializer, startConsoleApp, TokenGuard } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Markup that would run if the page ever set a server text as HTML. */
const HOSTILE = '<img src=x onerror="window.__pwned = 1">';
const AUTH = { 'x-console-token': CONSOLE_TOKEN };
const SAME_SITE = { ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/json' };

/** Three messages dead because the broker's serializer refused them; the serializer can be fixed in the test. */
async function startWithDeadLetters(db: TestDatabase, queue: string, serializer: FailingSerializer) {
  const app = await startConsoleApp({ db, queue, serializer, console: { guard: TokenGuard, sampleInterval: 500 } });
  const outbox = app.get(OutboxService);
  const ids = await outbox.transaction(async () => {
    const list: string[] = [];
    for (let n = 1; n <= 3; n++) list.push(await outbox.emit('Refunded', { fail: `refund ${n} refused ${HOSTILE}` }));
    return list;
  });
  await waitFor(async () => (await outbox.stats()).dead === 3, 'three messages to go dead');
  return { app, ids };
}

describeWith(['postgres', 'rabbitmq'], `Outbox console dry run API on ${DATABASE_LABEL.postgres}`, () => {
  let db: TestDatabase;
  let app: INestApplication;
  let recorder: AmqpRecorder;
  let ids: string[];
  const serializer = new FailingSerializer();
  const queue = uniqueQueue('outbox-console-dry-run');
  const http = () => request(app.getHttpServer());

  beforeAll(async () => {
    db = await createTestDatabase('postgres');
    recorder = await new AmqpRecorder(queue).start();
    ({ app, ids } = await startWithDeadLetters(db, queue, serializer));
  });
  afterAll(async () => {
    await app?.close();
    await recorder?.stop();
    await db?.drop();
  });

  it('refuses without the console guard or its same-site header, and tries nothing then', async () => {
    const body = { filter: {} };
    await http().post('/outbox-console/api/dry-run').set({ 'content-type': 'application/json' }).send(body).expect(401);
    await http()
      .post('/outbox-console/api/dry-run')
      .set({ ...SAME_SITE, 'x-console-token': 'wrong' })
      .send(body)
      .expect(403);
    await http()
      .post('/outbox-console/api/dry-run')
      .set({ ...AUTH, 'content-type': 'application/json' })
      .send(body)
      .expect(403);
    await http().post('/outbox-console/api/dry-run').set(SAME_SITE).send({ nope: 1 }).expect(400);
  });

  it('reports each message, redacted, and publishes nothing', async () => {
    const res = await http().post('/outbox-console/api/dry-run').set(SAME_SITE).send({ filter: {} }).expect(200);
    expect([res.body.tried, res.body.ok, res.body.failed]).toEqual([3, 0, 3]);
    const target = res.body.results[0].targets[0];
    expect(target).toMatchObject({ kind: 'broker', destination: 'broker:BROKER', ok: false });
    expect(target.error.errorClass).toBe('OutboxNonRetryableError');
    expect(target.error.message).toContain('amqp://***@broker.internal');
    expect(JSON.stringify(res.body)).not.toContain(BROKER_SECRET);

    serializer.failing = false;
    try {
      const fixed = await http()
        .post('/outbox-console/api/dry-run')
        .set(SAME_SITE)
        .send({ ids: [ids[0]] })
        .expect(200);
      expect(fixed.body.results).toHaveLength(1);
      expect(fixed.body.results[0].targets[0]).toMatchObject({
        ok: true,
        packet: { transport: 'rmq', pattern: 'Refunded', connected: true },
      });
    } finally {
      serializer.failing = true;
    }
    expect(recorder.messages).toEqual([]);
    expect(await app.get(OutboxDeadLetters).count()).toBe(3);
  });
});

if (missingForBrowser.length > 0) {
  describeMissingBrowser('Outbox console dry run in a real browser');
} else {
  describeWith(['postgres', 'rabbitmq'], `Outbox console "Try" then "Requeue" in headless Chromium`, () => {
    let db: TestDatabase;
    let app: INestApplication;
    let recorder: AmqpRecorder;
    let ids: string[];
    let browser: import('playwright-core').Browser;
    let base: string;
    const serializer = new FailingSerializer();
    const queue = uniqueQueue('outbox-console-browser-try');

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      recorder = await new AmqpRecorder(queue).start();
      ({ app, ids } = await startWithDeadLetters(db, queue, serializer));
      await app.listen(0, '127.0.0.1');
      base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      browser = await pw!.chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });
    afterAll(async () => {
      await browser?.close();
      await app?.close();
      await recorder?.stop();
      await db?.drop();
    });

    it('tries a failure group (errors shown as text), tries again once fixed, then requeues what passed', async () => {
      const context = await browser.newContext({
        extraHTTPHeaders: AUTH,
        viewport: { width: 1280, height: 1000 },
      });
      const page = await context.newPage();
      await page.goto(`${base}/outbox-console`);
      const group = page.locator('#group-rows tr').first();
      await group.waitFor({ timeout: 20_000 });
      // "Try" comes before "Requeue…" in the group's actions.
      expect(await group.locator('td.row-actions button').allInnerTexts()).toEqual([
        'Show',
        'Try',
        'Requeue…',
        'Purge…',
      ]);

      await group.locator('button.try').click();
      const summary = page.locator('#trial-summary', { hasText: 'tried 3' });
      await summary.waitFor();
      expect(await summary.innerText()).toContain('0 would succeed, 3 would fail again');
      expect(await page.locator('#trial-rows tr[data-ok="false"]').count()).toBe(3);
      const detail = await page.locator('#trial-rows tr').first().locator('td.detail').innerText();
      expect(detail).toContain('broker:BROKER: OutboxNonRetryableError: refund');
      expect(detail).toContain(HOSTILE);
      expect(await page.locator('#trial-requeue').isHidden()).toBe(true);
      expect(await page.evaluate('window.__pwned')).toBeUndefined();
      expect(await page.locator('main img, main script').count()).toBe(0);
      expect(await page.content()).not.toContain(BROKER_SECRET);
      expect(recorder.messages).toEqual([]);

      // The serializer is fixed: the dead-letter view's "Try all matching" now passes, still sending nothing.
      serializer.failing = false;
      await page.click('#try-all');
      await page.locator('#trial-summary', { hasText: '3 would succeed, 0 would fail again' }).waitFor();
      expect(await page.locator('#trial-rows tr[data-ok="true"]').count()).toBe(3);
      expect(await page.locator('#trial-rows tr').first().locator('td.detail').innerText()).toMatch(
        /^broker:BROKER: would send Refunded over rmq \(\d+ bytes; headers x-message-id\)$/,
      );
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.locator('#trial').screenshot({ path: join(SCREENSHOTS, 'console-dry-run.png') });
      expect(recorder.messages).toEqual([]);
      expect(await app.get(OutboxDeadLetters).count()).toBe(3);

      await page.click('#trial-requeue');
      await page.locator('dialog#confirm').waitFor();
      expect(await page.locator('#confirm-text').innerText()).toBe('Requeue the 3 message(s) that passed the dry run?');
      await page.click('#confirm-ok');
      await page.locator('#notice', { hasText: 'Requeued 3 message(s).' }).waitFor();
      await waitFor(() => ids.every((id) => recorder.distinct().has(id)), 'the requeued messages on RabbitMQ');
      expect(await app.get(OutboxDeadLetters).count()).toBe(0);
      await context.close();
    });
  });
}
