import { ExecutionContext, INestApplication, Injectable } from '@nestjs/common';
import { mkdirSync } from 'node:fs';
import { join } from 'node:path';
import request from 'supertest';
import { DataSource } from 'typeorm';
import { OutboxDeadLetters, OutboxMessage, OutboxService } from '../src';
import { AmqpRecorder } from './helpers/amqp-recorder';
import { CHROMIUM, CHROMIUM_ARGS, describeMissingBrowser, missingForBrowser, pw, SCREENSHOTS } from './helpers/browser';
import { uniqueQueue } from './helpers/consumers';
import { CONSOLE_TOKEN, FailingSerializer, startConsoleApp, TokenGuard } from './helpers/console-app';
import { createTestDatabase, DATABASE_LABEL, DatabaseKind, servicesOf, TestDatabase } from './helpers/databases';
import { waitFor } from './helpers/ports';
import { describeWith } from './helpers/services';

/** Markup that would run if the page ever set a text as HTML. */
const HOSTILE = '<img src=x onerror="window.__pwned = 1">';
const AUTH = { 'x-console-token': CONSOLE_TOKEN };
const SAME_SITE = { ...AUTH, 'x-outbox-console': '1', 'content-type': 'application/json' };
const STORED_PASSWORD = 'pw-stored-card-secret';
const STORED_TOKEN = 'tok-stored-gateway-secret';

/** The console's guard of these tests: the token, and the operator it names as the request's principal. */
@Injectable()
class OperatorGuard extends TokenGuard {
  override canActivate(context: ExecutionContext): boolean {
    const allowed = super.canActivate(context);
    if (allowed) context.switchToHttp().getRequest<{ user?: unknown }>().user = { id: 'ops:ana' };
    return allowed;
  }
}

/** Two refunds dead because the serializer refuses every payload with `fail`; each carries a card password. */
async function startWithDeadRefunds(db: TestDatabase, queue: string, allowEdit: boolean) {
  const app = await startConsoleApp({
    db,
    queue,
    serializer: new FailingSerializer(),
    console: { guard: OperatorGuard, sampleInterval: 500 },
    outbox: allowEdit ? { deadLetters: { allowEdit: true } } : { publisher: { enabled: false } },
  });
  if (!allowEdit) return { app, ids: [] };
  const outbox = app.get(OutboxService);
  const ids = await outbox.transaction(async () => {
    const list: string[] = [];
    for (let n = 1; n <= 2; n++) {
      list.push(
        await outbox.emit(
          'Refunded',
          { fail: `refund ${n} refused ${HOSTILE}`, amount: 10 * n, card: { password: STORED_PASSWORD } },
          { key: `customer-${n}`, headers: { tenant: 't1', authorization: `Bearer ${STORED_TOKEN}` } },
        ),
      );
    }
    return list;
  });
  await waitFor(async () => (await outbox.stats()).dead === 2, 'two refunds to go dead');
  return { app, ids };
}

for (const kind of ['postgres', 'mariadb', 'sqlite'] as DatabaseKind[]) {
  describeWith(
    [...servicesOf(kind), 'rabbitmq'],
    `Outbox console edit-and-requeue API on ${DATABASE_LABEL[kind]}`,
    () => {
      let db: TestDatabase;
      let app: INestApplication;
      let off: INestApplication;
      let recorder: AmqpRecorder;
      let ids: string[];
      const queue = uniqueQueue('outbox-console-edit');
      const http = () => request(app.getHttpServer());

      beforeAll(async () => {
        db = await createTestDatabase(kind);
        recorder = await new AmqpRecorder(queue).start();
        ({ app, ids } = await startWithDeadRefunds(db, queue, true));
        ({ app: off } = await startWithDeadRefunds(db, uniqueQueue('outbox-console-edit-off'), false));
      });
      afterAll(async () => {
        await off?.close();
        await app?.close();
        await recorder?.stop();
        await db?.drop();
      });

      const rows = () =>
        app
          .get(DataSource)
          .getRepository(OutboxMessage)
          .find({ order: { seq: 'ASC' } });

      it('refuses without the guard, the same-site header or a JSON body, and for bad edits — changing nothing', async () => {
        const before = await rows();
        const body = { id: ids[0], payload: '{"amount":1}' };
        const post = () => http().post('/outbox-console/api/edit');
        await post().set({ 'content-type': 'application/json' }).send(body).expect(401);
        await post()
          .set({ ...SAME_SITE, 'x-console-token': 'wrong' })
          .send(body)
          .expect(403);
        await post()
          .set({ ...AUTH, 'content-type': 'application/json' })
          .send(body)
          .expect(403);
        const problem = async (send: object, status: number, type: string) => {
          const res = await post().set(SAME_SITE).send(send).expect(status);
          expect(res.headers['content-type']).toContain('application/problem+json');
          expect(res.body.type).toBe(`urn:nestjs-outbox:console:${type}`);
          return res.body.detail as string;
        };
        expect(await problem({ id: ids[0], payload: '{"amount": 1,' }, 400, 'bad-request')).toMatch(/not valid JSON/);
        expect(await problem({ id: ids[0], payload: '{}', pattern: 'X' }, 400, 'bad-request')).toMatch(/Unknown body/);
        expect(await problem({ id: ids[0], headers: '{"x-message-id":"x"}' }, 400, 'bad-request')).toMatch(
          /written by the library/,
        );
        expect(await problem({ id: 'no-such-message', payload: '{}' }, 404, 'not-found')).toContain('no-such-message');
        expect(await rows()).toEqual(before);
      });

      it('replaces a dead letter by the edited copy: stored secrets left as *** are kept, the operator is audited, it is delivered, a second edit is a 409', async () => {
        const shown = await http().get(`/outbox-console/api/messages/${ids[0]}`).set(AUTH).expect(200);
        // The console shows it redacted; the operator edits what is shown.
        const payload = JSON.parse(shown.body.payload);
        expect(payload.card.password).toBe('***');
        expect(shown.body.headers.authorization).toBe('***');
        const edited = { amount: 15, card: payload.card };
        const res = await http()
          .post('/outbox-console/api/edit')
          .set(SAME_SITE)
          .send({
            id: ids[0],
            destination: shown.body.destination,
            payload: JSON.stringify(edited),
            headers: JSON.stringify(shown.body.headers),
            reason: `amount corrected ${HOSTILE}`,
          })
          .expect(200);
        const copyId: string = res.body.messageId;
        expect(copyId).not.toBe(ids[0]);
        expect(res.body.audit).toMatchObject({
          replaces: ids[0],
          actor: 'ops:ana',
          reason: `amount corrected ${HOSTILE}`,
        });
        expect(res.body.audit.changes.map((c: { path: string }) => c.path)).toEqual(['/amount', '/fail']);
        expect(JSON.stringify(res.body)).not.toMatch(new RegExp(`${STORED_PASSWORD}|${STORED_TOKEN}`));

        // Delivered with the stored password (not '***') and the new id; the original is kept and marked.
        await waitFor(() => recorder.distinct().has(copyId), 'the corrected copy on RabbitMQ');
        const sent = recorder.messages.find((m) => m.messageId === copyId)!;
        expect(sent.data).toEqual({ amount: 15, card: { password: STORED_PASSWORD } });
        const copyRow = (await rows()).find((r) => r.messageId === copyId)!;
        expect(JSON.parse(copyRow.headers!)).toEqual({
          tenant: 't1',
          authorization: `Bearer ${STORED_TOKEN}`,
          'x-outbox-replaces': ids[0],
        });
        const original = await http().get(`/outbox-console/api/messages/${ids[0]}`).set(AUTH).expect(200);
        expect(original.body).toMatchObject({ status: 'replaced', replacedBy: copyId });
        expect(original.body.edit.actor).toBe('ops:ana');
        const count = await http().get('/outbox-console/api/dead-letters/count').set(AUTH).expect(200);
        expect(count.body.count).toBe(1);

        const again = await http()
          .post('/outbox-console/api/edit')
          .set(SAME_SITE)
          .send({ id: ids[0], payload: '{"amount":16}' })
          .expect(409);
        expect(again.body).toMatchObject({ type: 'urn:nestjs-outbox:console:not-dead', status: 409 });
        expect(again.body.detail).toContain(copyId);
      });

      it('is refused with 403, and not offered, where the outbox does not allow edits', async () => {
        const list = await request(off.getHttpServer()).get('/outbox-console/api/outboxes').set(AUTH).expect(200);
        expect(list.body.outboxes.map((o: { allowEdit: boolean }) => o.allowEdit)).toEqual([false]);
        const on = await http().get('/outbox-console/api/outboxes').set(AUTH).expect(200);
        expect(on.body.outboxes.map((o: { allowEdit: boolean }) => o.allowEdit)).toEqual([true]);
        const res = await request(off.getHttpServer())
          .post('/outbox-console/api/edit')
          .set(SAME_SITE)
          .send({ id: ids[1], payload: '{"amount":1}' })
          .expect(403);
        expect(res.body.type).toBe('urn:nestjs-outbox:console:edit-disabled');
        expect(res.body.detail).toContain('deadLetters: { allowEdit: true }');
        expect(await app.get(OutboxDeadLetters).get(ids[1])).toMatchObject({ status: 'dead' });
      });
    },
  );
}

if (missingForBrowser.length > 0) {
  describeMissingBrowser('Outbox console edit-and-requeue in a real browser');
} else {
  describeWith(['postgres', 'rabbitmq'], 'Outbox console "Edit…" in headless Chromium', () => {
    let db: TestDatabase;
    let app: INestApplication;
    let off: INestApplication;
    let recorder: AmqpRecorder;
    let ids: string[];
    let browser: import('playwright-core').Browser;
    const queue = uniqueQueue('outbox-console-browser-edit');
    const baseOf = (a: INestApplication) =>
      `http://127.0.0.1:${(a.getHttpServer().address() as { port: number }).port}`;

    beforeAll(async () => {
      db = await createTestDatabase('postgres');
      recorder = await new AmqpRecorder(queue).start();
      ({ app, ids } = await startWithDeadRefunds(db, queue, true));
      ({ app: off } = await startWithDeadRefunds(db, uniqueQueue('outbox-console-browser-edit-off'), false));
      await app.listen(0, '127.0.0.1');
      await off.listen(0, '127.0.0.1');
      browser = await pw!.chromium.launch({ executablePath: CHROMIUM, args: CHROMIUM_ARGS });
    });
    afterAll(async () => {
      await browser?.close();
      await off?.close();
      await app?.close();
      await recorder?.stop();
      await db?.drop();
    });

    it('edits a dead refund, confirms, delivers the copy and shows its audit — hostile text stays text', async () => {
      const context = await browser.newContext({ extraHTTPHeaders: AUTH, viewport: { width: 1280, height: 1300 } });
      const page = await context.newPage();
      await page.goto(`${baseOf(app)}/outbox-console`);
      const row = page.locator(`#dead-rows tr[data-id="${ids[0]}"]`);
      await row.waitFor({ timeout: 20_000 });
      await row.click();
      await page.locator('#d-edit:not([hidden])').waitFor();
      await page.click('#d-edit');
      const shownPayload = JSON.parse(await page.locator('#e-payload').inputValue());
      expect(shownPayload).toEqual({ fail: `refund 1 refused ${HOSTILE}`, amount: 10, card: { password: '***' } });
      await page.fill('#e-payload', JSON.stringify({ amount: 11, card: { password: '***' }, note: HOSTILE }, null, 2));
      await page.fill('#e-reason', `customer asked ${HOSTILE}`);
      mkdirSync(SCREENSHOTS, { recursive: true });
      await page.locator('#detail').screenshot({ path: join(SCREENSHOTS, 'console-edit.png') });
      await page.click('#e-submit');
      await page.locator('dialog#confirm').waitFor();
      expect(await page.locator('#confirm-text').innerText()).toContain(`Replace dead message ${ids[0]}`);
      await page.click('#confirm-ok');
      await page.locator('#notice', { hasText: `Replaced message ${ids[0]} by ` }).waitFor();

      // The detail now shows the copy, with the audit as text.
      await page.locator('#d-audit:not([hidden])').waitFor();
      const audit = await page.locator('#d-audit-text').innerText();
      expect(audit).toContain(`Corrected copy of ${ids[0]}`);
      expect(audit).toContain('by ops:ana');
      expect(audit).toContain(`Reason: customer asked ${HOSTILE}`);
      expect(audit).toContain('payload/amount: 10 → 11');
      expect(await page.locator('#d-edit').isHidden()).toBe(true); // a pending copy is not edited
      const copyId = (await page.locator('#d-title').innerText()).split(' · ')[1];
      await waitFor(() => recorder.distinct().has(copyId), 'the corrected copy on RabbitMQ');
      expect(recorder.messages.find((m) => m.messageId === copyId)!.data).toEqual({
        amount: 11,
        card: { password: STORED_PASSWORD },
        note: HOSTILE,
      });
      await page.locator('#detail').screenshot({ path: join(SCREENSHOTS, 'console-edit-audit.png') });
      expect(await page.evaluate('window.__pwned')).toBeUndefined();
      expect(await page.locator('main img, main script').count()).toBe(0);
      expect(await page.content()).not.toMatch(new RegExp(`${STORED_PASSWORD}|${STORED_TOKEN}`));
      await context.close();
    });

    it('offers no Edit where the outbox does not allow it', async () => {
      const context = await browser.newContext({ extraHTTPHeaders: AUTH });
      const page = await context.newPage();
      await page.goto(`${baseOf(off)}/outbox-console`);
      const row = page.locator(`#dead-rows tr[data-id="${ids[1]}"]`);
      await row.waitFor({ timeout: 20_000 });
      await row.click();
      await page.locator('#detail:not([hidden])').waitFor();
      await page.locator('#d-requeue:not([disabled])').waitFor();
      expect(await page.locator('#d-edit').isHidden()).toBe(true);
      await context.close();
    });
  });
}
