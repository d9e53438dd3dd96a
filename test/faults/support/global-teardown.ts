import { rmSync } from 'node:fs';
import { readFaultRuns, renderFaultReport } from './report';

/** Prints the fault table and the one-line JSON summary after every suite has run. */
export default async function globalTeardown(): Promise<void> {
  const dir = process.env.OUTBOX_FAULTS_REPORT_DIR;
  if (!dir) return;
  const runs = readFaultRuns(dir);
  process.stdout.write(`\n${renderFaultReport(runs)}\n`);
  rmSync(dir, { recursive: true, force: true });
}
