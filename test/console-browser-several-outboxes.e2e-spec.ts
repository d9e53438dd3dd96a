import type { INestApplication } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import { getOutboxToken, OutboxDeadLetters, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { uniqueQueue } from './helpers/consumers';
import { CONSOLE_TOKEN, FailingSerializer, startTwoOutboxConsoleApp } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

const TITLE = `Outbox console of two outboxes in headless Chromium: default on ${DATABASE_LABEL.postgres}, 'billing' on ${DATABASE_LABEL.sqlite}`;

if (missingForBrowser.length > 0) {
  describeMissingBrowser(TITLE);
} else {
  describeWith(['postgres', 'rabbitmq'], TITLE, () => {
    let ordersDb: TestDatabase;
    let billingDb: TestDatabase;
    let app: INestApplication;
    let browser: import('playwright-core').Browser;
    let base: string;
    const queues = { orders: uniqueQueue('outbox-browser-orders'), billing: uniqueQueue('outbox-browser-billing') };
    const serializers = { orders: new FailingSerializer(), billing: new FailingSerializer() };
    const recorders = {} as Record<'orders' | 'billing', AmqpRecorder>;

    beforeAll(async () => {
      [ordersDb, billingDb] = await Promise.all([createTestDatabase('postgres'), createTestDatabase('sqlite')]);
      recorders.orders = await new AmqpRecorder(queues.orders).start();
      recorders.billing = await new AmqpRecorder(queues.billing).start();
      app = await startTwoOutboxConsoleApp({
        ordersDb,
        billingDb,
        queues,
        serializers,
        console: { guard: (await import('./helpers/console-app')).TokenGuard, sampleInterval: 500 },
      });
      await app.listen(0, '127.0.0.1');
      base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
      browser = await pw!.chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });

    afterAll(async () => {
      await browser?.close();
      await app?.close();
      await recorders.orders?.stop();
      await recorders.billing?.stop();
      await Promise.all([ordersDb?.drop(), billingDb?.drop()]);
    });

    it('shows both outboxes, switches between them, and requeues in the one selected', async () => {
      const orders = app.get(OutboxService);
      const billing = app.get<OutboxService>(getOutboxToken(OutboxService, 'billing'));
      const billingDeadLetters = app.get<OutboxDeadLetters>(getOutboxToken(OutboxDeadLetters, 'billing'));
      // Traffic on both for the charts, then dead letters: one order, two invoices.
      for (let i = 0; i < 4; i++) {
        await orders.transaction(async () => {
          for (let n = 0; n < 4; n++) await orders.emit('OrderPlaced', { order: `${i}-${n}` });
        });
        await billing.transaction(async () => {
          for (let n = 0; n < 2; n++) await billing.emit('InvoiceIssued', { invoice: `${i}-${n}` });
        });
        await new Promise((resolve) => setTimeout(resolve, 400));
      }
      const orderId = await orders.transaction(() => orders.emit('OrderPlaced', { fail: 'warehouse refused it' }));
      const invoiceIds = await billing.transaction(async () => [
        await billing.emit('InvoiceIssued', { fail: 'ledger rejected the invoice', invoice: 'x-1' }),
        await billing.emit('InvoiceIssued', { fail: 'ledger rejected the invoice', invoice: 'x-2' }),
      ]);
      await waitFor(
        async () => (await orders.stats()).dead === 1 && (await billing.stats()).dead === 2,
        'one order and two invoices to go dead',
      );

      const context = await browser.newContext({
        extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN },
        viewport: { width: 1280, height: 1000 },
      });
      const page = await context.newPage();
      await page.goto(`${base}/outbox-console`);
      const buttons = page.locator('#outboxes button.outbox');
      await buttons.nth(1).waitFor();
      expect(await buttons.allInnerTexts()).toEqual([
        expect.stringMatching(/^default\s+\d+ pending · 1 dead/),
        expect.stringMatching(/^billing\s+\d+ pending · 2 dead/),
      ]);
      expect(await page.locator('#outboxes [aria-pressed="true"]').innerText()).toMatch(/^default/);
      await page.locator(`#dead-rows tr[data-id="${orderId}"]`).waitFor();
      expect(await page.locator('#dead-rows tr').count()).toBe(1);

      await page.click('#outboxes button[data-outbox="billing"]');
      await page.locator(`#dead-rows tr[data-id="${invoiceIds[0]}"]`).waitFor();
      expect(await page.locator('#dead-rows tr').count()).toBe(2);
      expect(new URL(page.url()).searchParams.get('outbox')).toBe('billing');
      await page.locator('#dead', { hasText: /^2$/ }).waitFor();
      expect(await page.locator('h1').innerText()).toBe('Outbox console · billing');
      await page.locator(`#dead-rows tr[data-id="${invoiceIds[1]}"]`).click();
      await page.locator('#d-history tr').first().waitFor();
      expect(await page.locator('#d-history tr').first().innerText()).toContain('ledger rejected the invoice');
      await page.waitForTimeout(1200); // one more chart sample, for the screenshot
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.screenshot({ path: join(SCREENSHOTS, 'console-several-outboxes.png'), fullPage: true });

      // The ledger is fixed: requeue that invoice from the billing view; only the billing queue gets it.
      serializers.billing.failing = false;
      await page.click('#d-requeue');
      await page.locator('dialog#confirm').waitFor();
      expect(await page.locator('#confirm-text').innerText()).toContain(invoiceIds[1]);
      await page.click('#confirm-ok');
      await page.locator('#notice', { hasText: 'Requeued 1 message(s).' }).waitFor();
      await waitFor(() => recorders.billing.distinct().has(invoiceIds[1]), 'the invoice to reach the billing queue');
      expect(recorders.orders.distinct().has(invoiceIds[1])).toBe(false);
      await page.locator('#dead', { hasText: /^1$/ }).waitFor({ timeout: 20_000 });
      expect(await billingDeadLetters.count()).toBe(1);
      expect(await app.get(OutboxDeadLetters).count()).toBe(1);

      // The URL names the outbox: a reload (or a shared link) opens the same one.
      await page.reload();
      await page.locator(`#dead-rows tr[data-id="${invoiceIds[0]}"]`).waitFor();
      expect(await page.locator('#outboxes [aria-pressed="true"]').innerText()).toMatch(/^billing/);

      await page.click('#outboxes button[data-outbox="default"]');
      await page.locator(`#dead-rows tr[data-id="${orderId}"]`).waitFor();
      expect(await page.locator('#dead-rows tr').count()).toBe(1);
      await page.locator('#dead', { hasText: /^1$/ }).waitFor();
      await context.close();
    });

    it('answers a link to an outbox the app does not have with 404 naming the ones it has', async () => {
      const context = await browser.newContext({ extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN } });
      const page = await context.newPage();
      const res = await page.goto(`${base}/outbox-console?outbox=payroll`);
      expect(res?.status()).toBe(404);
      expect(await res?.headerValue('content-type')).toMatch(/^application\/problem\+json/);
      expect(await res?.text()).toContain('Its outboxes: default, billing');
      await context.close();
    });
  });
}
