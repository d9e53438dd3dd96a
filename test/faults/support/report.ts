import { randomBytes } from 'node:crypto';
import { readdirSync, readFileSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** What one run of one fault scenario observed. Every count is measured, never assumed. */
export interface FaultRun {
  /** Scenario number and name, e.g. `1 kill the publisher`. */
  scenario: string;
  /** Database / transport the run used, e.g. `PostgreSQL`. */
  variant: string;
  /** SIGKILLs sent to app processes. */
  kills: number;
  /** Events (outbox messages, or HTTP requests for the HTTP scenarios) the run produced. */
  events: number;
  /** Events that never reached their effect. */
  lost: number;
  /** Deliveries of an already-delivered message id caused by a second publish (absorbed by `@Idempotent()`). */
  duplicatePublishes: number;
  /** Deliveries of an already-delivered message id caused by the broker redelivering it (consumer killed). */
  redeliveries: number;
  /** Effects applied more than once for one message id or idempotency key. */
  duplicateEffects: number;
  /** HTTP responses with a 5xx status that the scenario did not call for (503 during a database outage is called for). */
  http5xx: number;
}

const COLUMNS: [keyof FaultRun | 'runs', string][] = [
  ['runs', 'runs'],
  ['kills', 'kills'],
  ['events', 'events'],
  ['lost', 'lost'],
  ['duplicatePublishes', 'duplicate publishes'],
  ['redeliveries', 'redeliveries'],
  ['duplicateEffects', 'duplicate effects'],
  ['http5xx', '5xx responses'],
];

/** Records a run's figures for the report printed at the end of `npm run test:faults`. Call it before asserting. */
export function recordFaultRun(run: Partial<FaultRun> & Pick<FaultRun, 'scenario' | 'variant'>): FaultRun {
  const full: FaultRun = {
    kills: 0,
    events: 0,
    lost: 0,
    duplicatePublishes: 0,
    redeliveries: 0,
    duplicateEffects: 0,
    http5xx: 0,
    ...run,
  };
  const dir = process.env.OUTBOX_FAULTS_REPORT_DIR;
  if (dir) writeFileSync(join(dir, `${Date.now()}-${randomBytes(4).toString('hex')}.json`), JSON.stringify(full));
  return full;
}

export function readFaultRuns(dir: string): FaultRun[] {
  return readdirSync(dir)
    .filter((f) => f.endsWith('.json'))
    .sort()
    .map((f) => JSON.parse(readFileSync(join(dir, f), 'utf8')) as FaultRun)
    .sort(
      (a, b) => a.scenario.localeCompare(b.scenario, 'en', { numeric: true }) || a.variant.localeCompare(b.variant),
    );
}

/** Totals over all runs, in the shape of the JSON line. */
export function totals(runs: FaultRun[]) {
  const sum = (k: keyof FaultRun) => runs.reduce((n, r) => n + (r[k] as number), 0);
  return {
    runs: runs.length,
    kills: sum('kills'),
    events: sum('events'),
    lost: sum('lost'),
    duplicate_publishes: sum('duplicatePublishes'),
    redeliveries: sum('redeliveries'),
    duplicate_effects: sum('duplicateEffects'),
    http_5xx: sum('http5xx'),
  };
}

/** A markdown table (one row per scenario and variant, then the totals) and one `{"faults": …}` JSON line. */
export function renderFaultReport(runs: FaultRun[]): string {
  const head = ['scenario', 'variant', ...COLUMNS.map(([, title]) => title)];
  const rows = runs.map((r) => [
    r.scenario,
    r.variant,
    ...COLUMNS.map(([k]) => String(k === 'runs' ? 1 : r[k as keyof FaultRun])),
  ]);
  const t = totals(runs);
  rows.push([
    '**total**',
    '',
    String(t.runs),
    String(t.kills),
    String(t.events),
    String(t.lost),
    String(t.duplicate_publishes),
    String(t.redeliveries),
    String(t.duplicate_effects),
    String(t.http_5xx),
  ]);
  const widths = head.map((h, i) => Math.max(h.length, ...rows.map((r) => r[i].length)));
  const line = (cells: string[]) =>
    `| ${cells.map((c, i) => (i < 2 ? c.padEnd(widths[i]) : c.padStart(widths[i]))).join(' | ')} |`;
  const rule = `|${widths.map((w, i) => (i < 2 ? `${'-'.repeat(w + 1)}-` : `${'-'.repeat(w + 1)}:`)).join('|')}|`;
  const table = [line(head), rule, ...rows.map(line)].join('\n');
  const json = JSON.stringify({
    faults: {
      ...t,
      scenarios: runs.map((r) => ({
        scenario: r.scenario,
        variant: r.variant,
        kills: r.kills,
        events: r.events,
        lost: r.lost,
        duplicate_publishes: r.duplicatePublishes,
        redeliveries: r.redeliveries,
        duplicate_effects: r.duplicateEffects,
        http_5xx: r.http5xx,
      })),
    },
  });
  return `Fault suite report\n\n${table}\n\n${json}`;
}
