/**
 * `npm run sample:demo`: drives the sample shop through the four cases, then a message that goes dead and is
 * requeued, and prints what happened.
 *
 * Talks to the sample at SAMPLE_URL (default http://localhost:$PORT, PORT defaulting to 3000). When nothing answers
 * there, it starts one with `npm run sample` (embedded SQLite + TCP), runs the demo, and stops it again.
 */
import { ChildProcess, spawn } from 'node:child_process';
import { randomBytes } from 'node:crypto';
import { join } from 'node:path';
import { DEFAULT_CONSOLE_TOKEN } from './config';

type Print = (line: string) => void;

interface Reply {
  status: number;
  body: any;
  replayed: boolean;
}

/** Runs the four cases (and a dead letter's requeue) against the sample at `baseUrl`. Every id is fresh, so it can run again and again. */
export async function runDemo(baseUrl: string, print: Print = console.log): Promise<void> {
  const run = randomBytes(3).toString('hex');
  const http = client(baseUrl);
  print(`Sample shop at ${baseUrl} (demo run ${run}; every id below is new for this run)`);

  // 1 ───────────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('1. A retried payment must not charge twice');
  const payment = { reference: `inv-${run}`, amount: 4200 };
  const payKey = `pay-${run}`;
  let r = await http.post('/payments', payment, payKey);
  print(`   POST /payments (key ${payKey}) → ${r.status} ${r.body.receipt}: applied, charged once`);
  r = await http.post('/payments', payment, payKey);
  print(
    `   the same request again (a client retry after a timeout) → ${r.status} ${r.body.receipt}: ${replayedOrNot(r)}`,
  );
  const burst = await Promise.all(Array.from({ length: 5 }, () => http.post('/payments', payment, payKey)));
  print(`   5 more retries at the same time → ${summarize(burst)}`);
  r = await http.post('/payments', { ...payment, amount: 9900 }, payKey);
  print(`   the same key with a different amount → ${r.status} ${r.body.title ?? ''}: a key belongs to one request`);
  r = await http.post('/payments', payment);
  print(`   no Idempotency-Key at all → ${r.status}: ${r.body.detail ?? r.body.title}`);
  r = await http.get(`/payments/${payment.reference}`);
  print(`   GET /payments/${payment.reference} → charges: ${r.body.charges}`);
  await printTrace(http, payKey, print);

  // 2 ───────────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('2. OrderPlaced never exists without its order (nor the order without its event)');
  const customer = `cust-${run}`;
  r = await http.post(
    '/orders',
    { customerId: customer, reference: `big-${run}`, amount: 5_000_000 },
    `order-big-${run}`,
  );
  print(`   POST /orders of 5,000,000 → ${r.status}: ${r.body.detail}`);
  print('     the order and its OrderPlaced event were written in one transaction and rolled back together');
  const first = await http.post(
    '/orders',
    { customerId: customer, reference: `ord1-${run}`, amount: 2500 },
    `order-1-${run}`,
  );
  print(
    `   POST /orders of 2,500 (key order-1-${run}) → ${first.status}: order ${first.body.id} and its event committed together`,
  );
  r = await http.post('/orders', { customerId: customer, reference: `ord1-${run}`, amount: 2500 }, `order-1-${run}`);
  print(
    `   the same request again → ${r.status} order ${r.body.id}: ${replayedOrNot(r)}, no second order, no second event`,
  );
  const second = await http.post(
    '/orders',
    { customerId: customer, reference: `ord2-${run}`, amount: 4000 },
    `order-2-${run}`,
  );
  print(`   POST /orders of 4,000 (key order-2-${run}) → ${second.status}: order ${second.body.id}`);
  const totals = await waitFor(
    http,
    `/customers/${customer}`,
    (c) => c.orders >= 2,
    'both orders to reach the consumer',
  );
  print(
    `   the consumer received exactly the two committed orders: GET /customers/${customer} → orders ${totals.orders}, totalSpent ${totals.totalSpent}`,
  );
  r = await http.get('/outbox');
  print(`   GET /outbox → ${JSON.stringify(r.body)}`);
  await printTrace(http, `order-1-${run}`, print);

  // 3 ───────────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('3. A consumer applies a redelivered message once');
  const delivered = await waitForDelivery(http, (d) => d.payload?.orderId === first.body.id, 1);
  print(`   OrderPlaced ${delivered[0].messageId} (order ${first.body.id}): ${delivered[0].outcome}`);
  r = await http.post(`/orders/${first.body.id}/redeliver`, {});
  print(`   the same message is published again (as after a publisher crash between publish and mark) → ${r.status}`);
  const redelivered = await waitForDelivery(http, (d) => d.messageId === r.body.messageId, 2);
  print(
    `   OrderPlaced ${redelivered[1].messageId} again: ${redelivered[1].outcome === 'skipped: already applied' ? 'already applied and skipped' : redelivered[1].outcome}`,
  );
  const after = (await http.get(`/customers/${customer}`)).body;
  print(
    `   GET /customers/${customer} → orders ${after.orders}, totalSpent ${after.totalSpent} (${after.orders === totals.orders && after.totalSpent === totals.totalSpent ? 'unchanged' : 'CHANGED'})`,
  );

  // 4 ───────────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('4. A mobile client retrying a flaky sign-up must not get two accounts');
  const email = `ada-${run}@example.com`;
  const signupKey = `signup-${run}`;
  const account = await http.post('/signups', { email }, signupKey);
  print(`   POST /signups ${email} (key ${signupKey}) → ${account.status}: account ${account.body.id}`);
  const retries = await Promise.all(Array.from({ length: 3 }, () => http.post('/signups', { email }, signupKey)));
  const same = retries.filter((x) => x.body.id === account.body.id).length;
  print(`   3 retries with the same key → ${summarize(retries)}; ${same} of them returned account ${account.body.id}`);
  r = await http.post('/signups', { email }, `signup-other-${run}`);
  print(`   a new key for the same email → ${r.status}: ${r.body.detail}`);

  // 5 ───────────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('5. A message its consumer cannot apply goes dead, and a requeue applies it once after the fix');
  const held = `held-${run}`;
  r = await http.put(`/customers/${held}/hold`);
  print(`   PUT /customers/${held}/hold → ${r.status}: the consumer refuses this customer's orders`);
  const heldKey = `order-held-${run}`;
  r = await http.post('/orders', { customerId: held, reference: `held-${run}`, amount: 1200 }, heldKey);
  print(`   POST /orders of 1,200 for ${held} → ${r.status}: order ${r.body.id} and its event committed`);
  const dead = await waitForState(http, heldKey, 'dead');
  const deadRow = dead.destinations.find((d: any) => d.state === 'dead');
  print(
    `   OrderPlaced ${dead.messageId} at ${deadRow.destination}: dead after ${deadRow.attempts} attempt, not retried: ${deadRow.lastError}`,
  );
  r = await http.delete(`/customers/${held}/hold`);
  print(`   DELETE /customers/${held}/hold → ${r.status}: the cause is fixed`);
  r = await http.console('POST', '/console/api/dry-run', { ids: [dead.messageId] });
  const why = (r.body.results ?? [])
    .flatMap((x: any) => [x.error, ...(x.targets ?? []).map((t: any) => t.error)])
    .find((e: any) => e);
  print(
    `   POST /console/api/dry-run (the console's Try, rolled back) → ${r.body.ok} of ${r.body.tried} would succeed${why ? ` (${why.errorClass}: ${why.message})` : ''}`,
  );
  r = await http.console('POST', '/console/api/requeue', { ids: [dead.messageId] });
  print(`   POST /console/api/requeue → ${r.body.count} requeued`);
  const heldTotals = await waitFor(http, `/customers/${held}`, (c) => c.orders >= 1, 'the requeued order to apply');
  print(`   GET /customers/${held} → orders ${heldTotals.orders}, totalSpent ${heldTotals.totalSpent}: applied once`);
  await printTrace(http, heldKey, print);

  // Totals ──────────────────────────────────────────────────────────────────────────────────────────────────
  print('');
  print('Final totals');
  print(`   payment ${payment.reference}: ${(await http.get(`/payments/${payment.reference}`)).body.charges} charge`);
  print(`   customer ${customer}: ${after.orders} orders, ${after.totalSpent} spent`);
  print(`   account ${email}: ${account.body.id}`);
  print(`   outbox: ${JSON.stringify((await http.get('/outbox')).body)}`);
}

function client(baseUrl: string) {
  const send = async (
    method: string,
    path: string,
    body?: unknown,
    key?: string,
    extra: Record<string, string> = {},
  ): Promise<Reply> => {
    const headers: Record<string, string> = { accept: 'application/json', ...extra };
    if (body !== undefined) headers['content-type'] = 'application/json';
    if (key !== undefined) headers['idempotency-key'] = key;
    const response = await fetch(new URL(path, baseUrl), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
    });
    const text = await response.text();
    let parsed: unknown = text;
    try {
      parsed = text.length > 0 ? JSON.parse(text) : {};
    } catch {
      // not JSON: keep the text
    }
    return { status: response.status, body: parsed, replayed: response.headers.get('idempotent-replayed') === 'true' };
  };
  const token = process.env.CONSOLE_TOKEN ?? DEFAULT_CONSOLE_TOKEN;
  return {
    get: (path: string, headers?: Record<string, string>) => send('GET', path, undefined, undefined, headers),
    post: (path: string, body: unknown, key?: string) => send('POST', path, body, key),
    put: (path: string) => send('PUT', path),
    delete: (path: string) => send('DELETE', path),
    /** A call to the console's API as an operator: its token, and the header its state-changing calls require. */
    console: (method: 'GET' | 'POST', path: string, body?: unknown) =>
      send(method, path, body, undefined, { 'x-console-token': token, 'x-outbox-console': '1' }),
  };
}

/**
 * Prints what the request of idempotency key `key` caused, from the console's trace API (`OutboxService.trace()`):
 * its record, the messages it emitted, and the consumers that applied them (the operator's token: CONSOLE_TOKEN).
 */
async function printTrace(http: ReturnType<typeof client>, key: string, print: Print): Promise<void> {
  const r = await http.console('GET', `/console/api/trace?id=${encodeURIComponent(key)}`);
  if (r.status !== 200 || !r.body.request) {
    print(`   trace of ${key}: ${r.status} ${r.body.detail ?? 'no record'}`);
    return;
  }
  const request = r.body.request;
  print(`   trace of ${key} (GET /console/api/trace): request ${request.state}, HTTP ${request.responseStatus}`);
  if (request.emitted.length === 0) print('     emitted no message');
  const message = (m: any, indent: string): void => {
    const appliedBy = m.consumers.map((c: any) => c.scope).join(', ') || 'no consumer in this database yet';
    print(`${indent}${m.pattern} ${m.messageId}: ${m.state}; applied by ${appliedBy}`);
    for (const c of m.consumers) for (const next of c.emitted) message(next, `${indent}  `);
  };
  for (const m of request.emitted) message(m, '     ');
}

/** Waits until the first message emitted by the request of key `key` is in `state` (the console's trace API). */
async function waitForState(http: ReturnType<typeof client>, key: string, state: string): Promise<any> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await http.console('GET', `/console/api/trace?id=${encodeURIComponent(key)}`);
    const message = r.body?.request?.emitted?.[0];
    if (message?.state === state) return message;
    if (Date.now() > deadline) {
      throw new Error(
        `Gave up after 30 s waiting for the message of ${key} to be ${state} (last: ${JSON.stringify(r.body)})`,
      );
    }
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

function replayedOrNot(r: Reply): string {
  return r.replayed ? 'replayed (Idempotent-Replayed: true), the handler did not run again' : 'NOT marked as a replay';
}

/** "201 ×3 (replayed), 409 ×2 (first one still running)" */
function summarize(replies: Reply[]): string {
  const groups = new Map<string, number>();
  for (const r of replies) {
    const label = r.replayed
      ? `${r.status} replayed`
      : r.status === 409
        ? '409 (the first one was still running)'
        : String(r.status);
    groups.set(label, (groups.get(label) ?? 0) + 1);
  }
  return [...groups].map(([label, n]) => `${label} ×${n}`).join(', ');
}

async function waitFor(
  http: ReturnType<typeof client>,
  path: string,
  done: (body: any) => boolean,
  what: string,
): Promise<any> {
  const deadline = Date.now() + 30_000;
  for (;;) {
    const r = await http.get(path);
    if (r.status === 200 && done(r.body)) return r.body;
    if (Date.now() > deadline)
      throw new Error(`Gave up after 30 s waiting for ${what} (last answer: ${r.status} ${JSON.stringify(r.body)})`);
    await new Promise((resolve) => setTimeout(resolve, 100));
  }
}

async function waitForDelivery(
  http: ReturnType<typeof client>,
  match: (d: any) => boolean,
  count: number,
): Promise<any[]> {
  const found = await waitFor(
    http,
    '/deliveries',
    (list: any[]) => list.filter(match).length >= count,
    `${count} deliveries in GET /deliveries`,
  );
  return (found as any[]).filter(match);
}

async function reachable(baseUrl: string): Promise<boolean> {
  try {
    await fetch(new URL('/outbox', baseUrl));
    return true;
  } catch {
    return false;
  }
}

/** Starts `npm run sample` (in its own process group, so it can be stopped with everything it spawned). */
async function startSample(baseUrl: string, print: Print): Promise<ChildProcess> {
  print(
    `No sample answers at ${baseUrl}; starting one with \`npm run sample\` (its log: sample/data/demo-sample.log) …`,
  );
  const { mkdirSync, openSync } = await import('node:fs');
  mkdirSync(join(__dirname, 'data'), { recursive: true });
  const log = openSync(join(__dirname, 'data', 'demo-sample.log'), 'w');
  const child = spawn('npm', ['run', 'sample'], {
    cwd: join(__dirname, '..'),
    stdio: ['ignore', log, log],
    detached: true,
    env: process.env,
  });
  const deadline = Date.now() + 180_000;
  while (!(await reachable(baseUrl))) {
    if (child.exitCode !== null)
      throw new Error(`npm run sample exited with code ${child.exitCode}; see sample/data/demo-sample.log`);
    if (Date.now() > deadline)
      throw new Error('The sample did not start within 3 minutes; see sample/data/demo-sample.log');
    await new Promise((resolve) => setTimeout(resolve, 250));
  }
  return child;
}

async function main(): Promise<void> {
  const baseUrl = process.env.SAMPLE_URL ?? `http://localhost:${process.env.PORT ?? 3000}`;
  const child = (await reachable(baseUrl)) ? undefined : await startSample(baseUrl, console.log);
  try {
    await runDemo(baseUrl);
  } finally {
    if (child?.pid) {
      process.kill(-child.pid, 'SIGTERM'); // the group of the `npm run sample` started above, nothing else
      console.log('\nStopped the sample started for this demo.');
    }
  }
}

if (require.main === module) {
  main().catch((error) => {
    console.error(`Demo failed: ${error instanceof Error ? error.message : error}`);
    process.exit(1);
  });
}
