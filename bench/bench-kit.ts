/** What a benchmark reports: table rows for people, and fields for the JSON line machines read. */
export interface BenchResult {
  /** Rows of the readable table (one object per row; keys are column titles). */
  table: Array<Record<string, string | number>>;
  /** Fields of the JSON line, printed as {"bench":"<name>", ...fields}. */
  fields: Record<string, number | string | boolean>;
}

export type Bench = () => Promise<BenchResult>;

/** Prints `result` as an aligned table followed by one JSON line. */
export function report(name: string, result: BenchResult): void {
  const rows = result.table;
  if (rows.length > 0) {
    const columns = Object.keys(rows[0]);
    const cell = (v: unknown) => (typeof v === 'number' ? (Number.isInteger(v) ? String(v) : v.toFixed(2)) : String(v));
    const widths = columns.map((c) => Math.max(c.length, ...rows.map((r) => cell(r[c]).length)));
    const line = (values: string[]) => values.map((v, i) => v.padEnd(widths[i])).join('  ');
    console.log(`\n== ${name}`);
    console.log(line(columns));
    console.log(line(widths.map((w) => '-'.repeat(w))));
    for (const r of rows) console.log(line(columns.map((c) => cell(r[c]))));
  }
  console.log(JSON.stringify({ bench: name, ...result.fields }));
}

/** Median of numbers. */
export function median(values: number[]): number {
  const s = [...values].sort((a, b) => a - b);
  const m = Math.floor(s.length / 2);
  return s.length % 2 ? s[m] : (s[m - 1] + s[m]) / 2;
}

/** p-th percentile (0–100) of numbers. */
export function percentile(values: number[], p: number): number {
  const s = [...values].sort((a, b) => a - b);
  if (s.length === 0) return NaN;
  const i = Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1));
  return s[i];
}
