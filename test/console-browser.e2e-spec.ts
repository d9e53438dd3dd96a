import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { OutboxDeadLetters, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { uniqueQueue } from './helpers/consumers';
import { BROKER_SECRET, CONSOLE_TOKEN, FailingSerializer, startConsoleApp } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

if (missingForBrowser.length > 0) {
  describeMissingBrowser('Outbox console in a real browser');
} else {
  describeWith(
    ['postgres', 'rabbitmq'],
    `Outbox console in headless Chromium on ${DATABASE_LABEL.postgres} → RabbitMQ`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let recorder: AmqpRecorder;
      let browser: import('playwright-core').Browser;
      let base: string;
      const serializer = new FailingSerializer();
      const queue = uniqueQueue('outbox-console-browser');

      beforeAll(async () => {
        db = await createTestDatabase('postgres');
        recorder = await new AmqpRecorder(queue).start();
        app = await startConsoleApp({
          db,
          queue,
          serializer,
          console: { guard: (await import('./helpers/console-app')).TokenGuard, sampleInterval: 500 },
        });
        await app.listen(0, '127.0.0.1');
        const address = app.getHttpServer().address() as { port: number };
        base = `http://127.0.0.1:${address.port}`;
        browser = await pw!.chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
      });

      afterAll(async () => {
        await browser?.close();
        await app?.close();
        await recorder?.stop();
        await db?.drop();
      });

      it('shows a dead letter, its redacted history; requeued after a confirmation, a consumer gets it', async () => {
        const outbox = app.get(OutboxService);
        // Some traffic for the chart, then one message the broker client refuses for good.
        for (let i = 0; i < 6; i++) {
          await outbox.transaction(async () => {
            for (let n = 0; n < 5; n++)
              await outbox.emit('OrderPlaced', { orderId: `${i}-${n}` }, { key: `order-${i}-${n}` });
          });
          await new Promise((resolve) => setTimeout(resolve, 300));
        }
        const poisonId = await outbox.transaction(() =>
          outbox.emit(
            'InvoiceIssued',
            { fail: 'invoice service rejected the message', invoice: 42 },
            {
              key: 'customer-7',
              headers: { 'x-tenant': 'acme', 'x-api-password': 'hunter2-header-secret' },
            },
          ),
        );
        await waitFor(() => recorder.distinct().size === 30, 'the 30 good messages to be delivered');

        const context = await browser.newContext({
          extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN },
          viewport: { width: 1280, height: 1000 },
        });
        const page = await context.newPage();
        await page.goto(`${base}/outbox-console`);
        const row = page.locator(`#dead-rows tr[data-id="${poisonId}"]`);
        await row.waitFor({ timeout: 20_000 });
        await page.locator('#dead', { hasText: '1' }).waitFor();
        await row.click();
        const history = page.locator('#d-history tr');
        await history.first().waitFor();
        expect(await history.count()).toBe(1);
        const historyText = await history.first().innerText();
        expect(historyText).toContain('invoice service rejected the message');
        expect(historyText).toContain('amqp://***@broker.internal:5672');
        expect(await page.locator('#d-headers').innerText()).toContain('"x-api-password": "***"');
        const everything = await page.content();
        expect(everything).not.toContain(BROKER_SECRET);
        expect(everything).not.toContain('hunter2-header-secret');
        await page.waitForTimeout(1200); // one more chart sample, for the screenshot
        mkdirSync(SCREENSHOTS, { recursive: true });
        await page.screenshot({ path: join(SCREENSHOTS, 'console.png'), fullPage: true });

        // The cause is fixed (a deploy): requeue it from the page, confirm, and the consumer gets it.
        serializer.failing = false;
        await page.click('#d-requeue');
        const dialog = page.locator('dialog#confirm');
        await dialog.waitFor();
        expect(await page.locator('#confirm-text').innerText()).toContain(poisonId);
        await page.click('#confirm-ok');
        await page.locator('#notice', { hasText: 'Requeued 1 message(s).' }).waitFor();
        await waitFor(() => recorder.distinct().has(poisonId), 'the requeued message to reach the consumer');
        await page.locator('#dead', { hasText: /^0$/ }).waitFor({ timeout: 20_000 });
        expect(await page.locator(`#dead-rows tr[data-id="${poisonId}"]`).count()).toBe(0);
        await context.close();
      });

      it('filters the dead letters and purges all matching after showing their count', async () => {
        const outbox = app.get(OutboxService);
        serializer.failing = true;
        const ids = await outbox.transaction(async () => [
          await outbox.emit('RefundIssued', { fail: 'refund gateway said no', n: 1 }),
          await outbox.emit('RefundIssued', { fail: 'refund gateway said no', n: 2 }),
          await outbox.emit('ShipmentBooked', { fail: 'carrier down', n: 3 }),
        ]);
        const deadLetters = app.get(OutboxDeadLetters);
        await waitFor(async () => (await deadLetters.count({ messageIds: ids })) === 3, 'three messages to go dead');
        const context = await browser.newContext({ extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN } });
        const page = await context.newPage();
        await page.goto(`${base}/outbox-console`);
        await page.locator(`#dead-rows tr[data-id="${ids[2]}"]`).waitFor();
        await page.fill('#f-pattern', 'RefundIssued');
        await page.click('#filters button[type=submit]');
        await page.locator(`#dead-rows tr[data-id="${ids[2]}"]`).waitFor({ state: 'detached' });
        expect(await page.locator('#dead-rows tr').count()).toBe(2);
        await page.click('#purge-all');
        await page.locator('dialog#confirm').waitFor();
        expect(await page.locator('#confirm-text').innerText()).toContain(
          'Purge 2 dead message(s) matching the filter?',
        );
        await page.click('#confirm-ok');
        await page.locator('#notice', { hasText: 'Purged 2 message(s).' }).waitFor();
        expect(await deadLetters.count({ messageIds: ids })).toBe(1);
        expect(await deadLetters.get(ids[2])).toMatchObject({ status: 'dead' });
        await deadLetters.purge([ids[2]]);
        await context.close();
      });

      it("refuses the page and the API without the guard's credentials", async () => {
        const context = await browser.newContext();
        const page = await context.newPage();
        const res = await page.goto(`${base}/outbox-console`);
        expect(res?.status()).toBe(401);
        const api = await page.goto(`${base}/outbox-console/api/summary`);
        expect(api?.status()).toBe(401);
        expect(await api?.headerValue('content-type')).toMatch(/^application\/problem\+json/);
        await context.close();
      });

      it("refuses a cross-site POST from another origin, with the operator's credentials attached", async () => {
        const outbox = app.get(OutboxService);
        const id = await outbox.transaction(() => outbox.emit('InvoiceIssued', { fail: 'still broken' }));
        serializer.failing = true;
        await waitFor(
          async () => (await app.get(OutboxDeadLetters).count({ messageIds: [id] })) === 1,
          'a message to go dead',
        );
        // The "attacker" page: any page of another origin (localhost and 127.0.0.1 are different sites) — here the
        // app's own 404 page reached through localhost, which has no Content-Security-Policy to stop its fetches.
        const context = await browser.newContext({ extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN } });
        const page = await context.newPage();
        await page.goto(`${base.replace('127.0.0.1', 'localhost')}/elsewhere`);
        const target = `${base}/outbox-console/api/purge`;
        const answered = page.waitForResponse((r) => r.url() === target && r.request().method() === 'POST');
        // A simple request (no custom header, text/plain): the browser sends it; the console must refuse it.
        await page.evaluate((url) => {
          void fetch(url, {
            method: 'POST',
            mode: 'no-cors',
            headers: { 'Content-Type': 'text/plain' },
            body: '{"filter":{}}',
          });
        }, target);
        expect((await answered).status()).toBe(403);
        // With the console's header the browser needs a CORS preflight, which the console never grants.
        const withHeader = await page.evaluate(async (url) => {
          try {
            await fetch(url, {
              method: 'POST',
              headers: { 'Content-Type': 'application/json', 'X-Outbox-Console': '1' },
              body: '{"filter":{}}',
            });
            return 'sent';
          } catch {
            return 'blocked';
          }
        }, target);
        expect(withHeader).toBe('blocked');
        expect(await app.get(OutboxDeadLetters).count({ messageIds: [id] })).toBe(1);
        await context.close();
      });
    },
  );
}
