import { ChildProcess, fork } from 'node:child_process';
import { randomUUID } from 'node:crypto';
import { join } from 'node:path';
import { createTestDatabase } from '../test/helpers/databases';
import type { Bench, BenchResult } from './bench-kit';
import { median } from './bench-kit';
import { PostgresCpu } from './postgres-cpu';

// autocannon ships no type declarations.
// eslint-disable-next-line @typescript-eslint/no-require-imports
const autocannon: (options: Record<string, unknown>) => Promise<any> = require('autocannon');

const DURATION_S = Number(process.env.BENCH_DURATION ?? 2);
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 8);
const CONNECTIONS = 10;

type Variant = 'plain' | 'idempotent' | 'minimal' | 'node-idempotency' | 'intercepted';
const VARIANTS: Variant[] = ['plain', 'idempotent', 'minimal', 'node-idempotency', 'intercepted'];

interface Run {
  rps: number;
  p99: number;
  bad: number;
  /** CPU time of the server process per completed request, in microseconds (robust to other load on the machine). */
  cpuUs: number;
  /** CPU time of the bench database's PostgreSQL backends per completed request, in microseconds. */
  dbCpuUs: number;
}

/** The server's CPU time so far (µs). */
function serverCpu(server: ChildProcess): Promise<number> {
  return new Promise((resolve) => {
    const onMessage = (m: any) => {
      if (typeof m?.cpu === 'number') {
        server.off('message', onMessage);
        resolve(m.cpu);
      }
    };
    server.on('message', onMessage);
    server.send('cpu');
  });
}

/** One autocannon run against a route, every request with a fresh Idempotency-Key (the first-execution path). */
async function load(
  server: ChildProcess,
  base: string,
  variant: Variant,
  seconds: number,
  dbCpu?: PostgresCpu,
): Promise<Run> {
  let n = 0;
  const dbBefore = await dbCpu?.sample();
  const cpuBefore = await serverCpu(server);
  const result = await autocannon({
    url: `${base}/${variant}`,
    method: 'POST',
    connections: CONNECTIONS,
    duration: seconds,
    headers: { 'content-type': 'application/json' },
    requests: [
      {
        setupRequest: (request: any) => ({
          ...request,
          headers: { ...request.headers, 'idempotency-key': randomUUID() },
          body: JSON.stringify({ reference: `r-${n++}`, amount: 1 }),
        }),
      },
    ],
  });
  const cpu = (await serverCpu(server)) - cpuBefore;
  const db = dbCpu && dbBefore ? PostgresCpu.between(dbBefore, await dbCpu.sample()) : NaN;
  return {
    rps: result.requests.average,
    p99: result.latency.p99,
    bad: result.non2xx + result.errors + result.timeouts,
    cpuUs: cpu / Math.max(1, result.requests.total),
    dbCpuUs: db / Math.max(1, result.requests.total),
  };
}

/**
 * `@Idempotent()` against the same POST handler (one insert in a transaction on PostgreSQL) without the decorator,
 * with a hand-written interceptor doing the minimum for the same guarantees (`idempotency-http.minimal.ts`) and
 * with `@node-idempotency/nestjs` on Redis; and, to show what Nest's interceptor chain costs, the plain handler behind
 * a no-op interceptor (`intercepted_vs_plain`). Short runs are interleaved, their order rotated every round, so drift on a shared machine hits every variant alike; mean throughputs are compared. The server's CPU time per request is
 * reported too, and that of the bench database's PostgreSQL backends: they are the figures least disturbed by other
 * load on the machine.
 */
const bench: Bench = async (): Promise<BenchResult> => {
  const db = await createTestDatabase('postgres');
  const server = fork(join(__dirname, 'idempotency-http.server.ts'), [], {
    execArgv: ['-r', 'ts-node/register/transpile-only'],
    env: { ...process.env, BENCH_DB_OPTIONS: JSON.stringify(db.options) },
    stdio: ['ignore', 'inherit', 'inherit', 'ipc'],
  });
  let dbCpu: PostgresCpu | undefined;
  try {
    const port = await new Promise<number>((resolve, reject) => {
      server.once('message', (m: any) => resolve(m.port));
      server.once('exit', (code) => reject(new Error(`bench server exited with ${code}`)));
    });
    const base = `http://127.0.0.1:${port}`;
    dbCpu = await PostgresCpu.open(db.options);
    for (const variant of VARIANTS) await load(server, base, variant, 1); // warm-up (JIT, pools, Redis connection)

    const runs = Object.fromEntries(VARIANTS.map((variant) => [variant, [] as Run[]])) as Record<Variant, Run[]>;
    for (let round = 0; round < ROUNDS; round++) {
      // Short runs, the order rotated every round: a load spike on this shared machine hits every variant alike.
      const order = VARIANTS.map((_, i) => VARIANTS[(i + round) % VARIANTS.length]);
      for (const variant of order) runs[variant].push(await load(server, base, variant, DURATION_S, dbCpu));
    }
    // Mean over equal-length runs (total requests / total time), so one slow run counts as what it is.
    const rps = (v: Variant) => runs[v].reduce((sum, r) => sum + r.rps, 0) / runs[v].length;
    const p99 = (v: Variant) => median(runs[v].map((r) => r.p99));
    const bad = (v: Variant) => runs[v].reduce((sum, r) => sum + r.bad, 0);
    const cpu = (v: Variant) => Math.round(median(runs[v].map((r) => r.cpuUs)));
    const dbCpuOf = (v: Variant) => Math.round(median(runs[v].map((r) => r.dbCpuUs)));
    const plain = rps('plain');
    const idempotent = rps('idempotent');
    const minimal = rps('minimal');
    const peer = rps('node-idempotency');
    const intercepted = rps('intercepted');
    const round2 = (x: number) => Math.round(x * 100) / 100;
    return {
      table: VARIANTS.map((v) => ({
        variant: v,
        'req/s (mean)': Math.round(rps(v)),
        'p99 ms': p99(v),
        'server CPU µs/req': cpu(v),
        'PostgreSQL CPU µs/req': dbCpu ? dbCpuOf(v) : 'n/a',
        'non-2xx/errors': bad(v),
        runs: runs[v].map((r) => Math.round(r.rps)).join(' / '),
      })),
      fields: {
        plain_rps: Math.round(plain),
        idempotent_rps: Math.round(idempotent),
        node_idempotency_rps: Math.round(peer),
        minimal_rps: Math.round(minimal),
        ratio_vs_plain: round2(idempotent / plain),
        ratio_vs_minimal: round2(idempotent / minimal),
        ratio_vs_node_idempotency: round2(idempotent / peer),
        minimal_vs_plain: round2(minimal / plain),
        intercepted_vs_plain: round2(intercepted / plain),
        plain_p99_ms: p99('plain'),
        idempotent_p99_ms: p99('idempotent'),
        minimal_p99_ms: p99('minimal'),
        node_idempotency_p99_ms: p99('node-idempotency'),
        plain_cpu_us_per_req: cpu('plain'),
        idempotent_cpu_us_per_req: cpu('idempotent'),
        minimal_cpu_us_per_req: cpu('minimal'),
        node_idempotency_cpu_us_per_req: cpu('node-idempotency'),
        intercepted_cpu_us_per_req: cpu('intercepted'),
        ...(dbCpu
          ? Object.fromEntries(VARIANTS.map((v) => [`${v.replace(/-/g, '_')}_db_cpu_us_per_req`, dbCpuOf(v)]))
          : {}),
        errors: VARIANTS.reduce((sum, v) => sum + bad(v), 0),
        connections: CONNECTIONS,
        duration_s: DURATION_S,
        rounds: ROUNDS,
      },
    };
  } finally {
    await dbCpu?.close();
    server.send('stop');
    await new Promise((resolve) => server.once('exit', resolve));
    await db.drop();
  }
};

export default bench;
