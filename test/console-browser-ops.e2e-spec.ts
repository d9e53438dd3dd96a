import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxService } from '../src';
import { IdempotencyRecord } from '../src/schema/idempotency-record.entity';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { uniqueQueue } from './helpers/consumers';
import { BROKER_SECRET, CONSOLE_TOKEN, FailingSerializer, startConsoleApp, TokenGuard } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Markup that would run or load something if the page ever set a server text as HTML. */
const HOSTILE_KEY = '<script>window.__pwned = 1</script>';
const HOSTILE_ERROR = '<img src=x onerror="window.__pwned = 2">';

if (missingForBrowser.length > 0) {
  describeMissingBrowser('Outbox console failure groups and pending view in a real browser');
} else {
  describeWith(
    ['postgres', 'rabbitmq'],
    `Outbox console failure groups, pending view and key lookup in headless Chromium on ${DATABASE_LABEL.postgres}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let recorder: AmqpRecorder;
      let browser: import('playwright-core').Browser;
      let base: string;
      const serializer = new FailingSerializer();
      const queue = uniqueQueue('outbox-console-browser-ops');

      beforeAll(async () => {
        db = await createTestDatabase('postgres');
        recorder = await new AmqpRecorder(queue).start();
        app = await startConsoleApp({ db, queue, serializer, console: { guard: TokenGuard, sampleInterval: 500 } });
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

      it('groups dead letters by cause, lists what is not dead yet, looks up a key, and requeues one group', async () => {
        const outbox = app.get(OutboxService);
        const labelIds = await outbox.transaction(async () => {
          for (let n = 1; n <= 3; n++) {
            await outbox.emit('PaymentCaptured', { fail: `payment ${1000 + n} declined ${HOSTILE_ERROR}` });
          }
          const ids = [];
          for (let n = 1; n <= 2; n++)
            ids.push(await outbox.emit('LabelPrinted', { fail: `printer "P-${n}" offline` }));
          await outbox.emit('ReminderDue', { customer: 7 }, { key: HOSTILE_KEY, delay: 3_600_000 });
          return ids;
        });
        await waitFor(async () => (await outbox.stats()).dead === 5, 'five messages to go dead');
        await app
          .get(DataSource)
          .getRepository(IdempotencyRecord)
          .insert({
            scope: 'POST /payments',
            key: 'pay-1001',
            fingerprint: 'f'.repeat(64),
            responseStatus: 201,
            responseBody: '{"secret":"stored-body-never-shown"}',
            responseHeaders: null,
            createdAt: new Date(),
            expiresAt: new Date(Date.now() + 86_400_000),
          } as never);

        const context = await browser.newContext({
          extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN },
          viewport: { width: 1280, height: 1000 },
        });
        const page = await context.newPage();
        await page.goto(`${base}/outbox-console`);
        const groups = page.locator('#group-rows tr');
        await groups.nth(1).waitFor({ timeout: 20_000 });
        expect(await groups.count()).toBe(2);
        const first = await groups.nth(0).innerText();
        expect(first).toContain('OutboxNonRetryableError');
        expect(first).toContain('payment <n> declined <img src=x onerror=<str>>');
        expect(first).toContain('PaymentCaptured');
        expect(await groups.nth(1).innerText()).toContain('printer <str> offline');

        const pendingRow = page.locator('#pending-rows tr[data-state="pending"]');
        await pendingRow.waitFor();
        expect(await pendingRow.locator('td').nth(2).innerText()).toBe(HOSTILE_KEY);

        await page.fill('#k-key', 'pay-1001');
        await page.click('#key-form button[type=submit]');
        const keyRow = page.locator('#key-rows tr[data-scope="POST /payments"]');
        await keyRow.waitFor();
        expect(await keyRow.innerText()).toMatch(/pay-1001\s+completed\s+201/);

        // Hostile texts stayed text: nothing ran, no element was made of them.
        expect(await page.evaluate('window.__pwned')).toBeUndefined();
        expect(await page.locator('main script, main img').count()).toBe(0);
        const everything = await page.content();
        expect(everything).not.toContain(BROKER_SECRET);
        expect(everything).not.toContain('stored-body-never-shown');

        mkdirSync(SCREENSHOTS, { recursive: true });
        for (const [id, name] of [
          ['#groups', 'console-groups.png'],
          ['#pending-view', 'console-pending.png'],
          ['#keys-view', 'console-keys.png'],
        ]) {
          await page.locator(id).screenshot({ path: join(SCREENSHOTS, name) });
        }

        // "Show" lists the group's messages in the dead letters.
        await groups.nth(1).locator('button.show').click();
        await page.locator('#dead-rows tr').nth(1).waitFor();
        await waitFor(async () => (await page.locator('#dead-rows tr').count()) === 2, 'only the group listed');
        expect(await page.locator('#dead-rows').innerText()).not.toContain('PaymentCaptured');

        // The printer is back: requeue its group only, after a confirmation naming the count and the cause.
        serializer.failing = false;
        await groups.nth(1).locator('button.requeue').click();
        await page.locator('dialog#confirm').waitFor();
        expect(await page.locator('#confirm-text').innerText()).toBe(
          'Requeue 2 dead message(s) of the failure group "OutboxNonRetryableError: printer <str> offline: refused by ' +
            'amqp://***@broker.internal:<n>"?',
        );
        await page.click('#confirm-ok');
        await page.locator('#notice', { hasText: 'Requeued 2 message(s).' }).waitFor();
        await waitFor(() => labelIds.every((id) => recorder.distinct().has(id)), 'the requeued labels on RabbitMQ');
        await waitFor(async () => (await page.locator('#group-rows tr').count()) === 1, 'one group left');
        expect(await app.get(OutboxDeadLetters).count({ pattern: 'PaymentCaptured' })).toBe(3);
        expect(await app.get(OutboxDeadLetters).count()).toBe(3);
        await context.close();
      });
    },
  );
}
