import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { OutboxService } from '../src';
import { OutboxConsoleModule } from '../src/console/outbox-console.module';
import { Payments, PaymentsController } from './fixtures/trace-app';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { CONSOLE_TOKEN, TokenGuard } from './helpers/console-app';
import { DATABASE_LABEL } from './helpers/databases';
import { useTestDatabase } from './helpers/e2e-fixture';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** A principal whose name would run script if the page ever set a server text as HTML: keys are scoped by it. */
const HOSTILE_USER = '<img src=x onerror="window.__pwned = 2">';

/**
 * The console's trace view: a request of key K (scope: a hostile principal name) emits two events, an in-process
 * handler applies them and emits a third that goes dead with a hostile, long error. Its API is behind the
 * console's guard; in Chromium the pasted key shows the tree, and every text from the server stays text.
 */
describeWith(['postgres'], `Outbox console trace view on ${DATABASE_LABEL.postgres}`, () => {
  const fx = useTestDatabase('postgres');
  let base: string;
  const key = `pay-${Date.now().toString(36)}`;

  beforeAll(async () => {
    const app = await fx.start({
      logger: false,
      controllers: [PaymentsController],
      providers: [Payments],
      imports: [OutboxConsoleModule.forRoot({ guard: TokenGuard, sampleInterval: 500 })],
      outbox: {
        client: undefined,
        publisher: { pollingInterval: 30 },
        retry: { maxAttempts: 2, initialDelay: 10, maxDelay: 20, jitter: 0 },
      },
    });
    await app.listen(0, '127.0.0.1');
    base = `http://127.0.0.1:${(app.getHttpServer().address() as { port: number }).port}`;
    const res = await request(base).post('/payments').set('Idempotency-Key', key).set('x-user', HOSTILE_USER).send({
      ref: 'r1',
    });
    expect(res.status).toBe(201);
    const outbox = app.get(OutboxService);
    await waitFor(async () => (await outbox.stats()).dead === 1, 'the receipt to go dead');
  });

  it("answers the trace API only with the guard's credentials, and never with the stored response", async () => {
    const path = `/outbox-console/api/trace?id=${encodeURIComponent(key)}&scope=${encodeURIComponent(HOSTILE_USER)}`;
    expect((await request(base).get(path)).status).toBe(401);
    expect((await request(base).get(path).set('x-console-token', 'wrong')).status).toBe(403);
    const ok = await request(base).get(path).set('x-console-token', CONSOLE_TOKEN);
    expect(ok.status).toBe(200);
    expect(ok.body.request).toMatchObject({ kind: 'request', scope: HOSTILE_USER, key, responseStatus: 201 });
    expect(ok.body.request.emitted).toHaveLength(2);
    expect(ok.text).not.toContain('stored-response-secret');
    // Another principal's scope (or none) finds nothing.
    const none = await request(base)
      .get(`/outbox-console/api/trace?id=${encodeURIComponent(key)}`)
      .set('x-console-token', CONSOLE_TOKEN);
    expect(none.body).toMatchObject({ request: null, message: null });
    const bad = await request(base)
      .get('/outbox-console/api/trace?id=x&depth=99')
      .set('x-console-token', CONSOLE_TOKEN);
    expect(bad.status).toBe(400);
    expect(bad.headers['content-type']).toMatch(/^application\/problem\+json/);
  });

  if (missingForBrowser.length > 0) {
    describeMissingBrowser('Outbox console trace view in a real browser');
    return;
  }

  it('shows the tree of a pasted key in Chromium; hostile texts stay text', async () => {
    // Closed in this test, before the fixture closes the app: the page polls the console every 2 s over a
    // keep-alive connection, and a closing HTTP server waits for the connections its clients keep open (one CI run
    // on Node 24 spent the whole 120 s teardown there).
    const browser = await pw!.chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    try {
      await showsTheTree(browser);
    } finally {
      await browser.close();
    }
  });

  async function showsTheTree(browser: import('playwright-core').Browser): Promise<void> {
    const context = await browser.newContext({
      extraHTTPHeaders: { 'x-console-token': CONSOLE_TOKEN },
      viewport: { width: 1280, height: 1000 },
    });
    const page = await context.newPage();
    await page.goto(`${base}/outbox-console`);
    await page.fill('#t-id', `"${key}"`); // as the client's header carried it
    await page.fill('#t-scope', HOSTILE_USER);
    await page.click('#trace-form button[type=submit]');
    const tree = page.locator('#trace-tree');
    await tree.locator('[data-trace=message][data-state=dead]').waitFor({ timeout: 20_000 });

    const request = tree.locator('[data-trace=record]').first();
    expect(await request.getAttribute('data-scope')).toBe(HOSTILE_USER);
    expect(await request.locator('.trace-line').first().innerText()).toContain(`key ${key}`);
    expect(await tree.locator('[data-trace=message]').count()).toBe(3);
    expect(await tree.locator('[data-trace=message][data-state=sent]').count()).toBe(2);
    const handlerRecords = tree.locator('[data-trace=record][data-scope="outbox-handler:Payments.onTaken"]');
    expect(await handlerRecords.count()).toBe(2);
    const dead = tree.locator('[data-trace=message][data-state=dead]');
    expect(await dead.innerText()).toContain('ReceiptSent');
    expect(await dead.locator('.trace-error').innerText()).toContain(
      'mail server said no <script>window.__pwned = 1</script>',
    );
    expect(await dead.locator('.trace-failure').count()).toBe(2);

    // Hostile texts stayed text: nothing ran, no element was made of them.
    expect(await page.evaluate('window.__pwned')).toBeUndefined();
    expect(await page.locator('main script, main img').count()).toBe(0);
    expect(await page.content()).not.toContain('stored-response-secret');

    // A message id shows the same subtree.
    const receiptId = await dead.getAttribute('data-message-id');
    const second = tree.locator('[data-trace=message]').nth(1);
    const secondId = await second.getAttribute('data-message-id');
    await page.fill('#t-id', secondId!);
    await page.fill('#t-scope', '');
    await page.click('#trace-form button[type=submit]');
    await tree.locator(`ul.trace > [data-message-id="${secondId}"]`).waitFor();
    expect(await tree.locator(`[data-message-id="${receiptId}"][data-state=dead]`).count()).toBe(1);
    expect(await tree.locator('[data-trace=message]').count()).toBe(2);

    await page.fill('#t-id', key);
    await page.fill('#t-scope', HOSTILE_USER);
    await page.click('#trace-form button[type=submit]');
    await tree.locator('[data-trace=message]').nth(2).waitFor();
    mkdirSync(SCREENSHOTS, { recursive: true });
    await page.locator('#trace-view').screenshot({ path: join(SCREENSHOTS, 'console-trace.png') });
  }
});
