import { mkdtempSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import sharedGlobalSetup from '../../helpers/global-setup';

/**
 * The shared service probe (under CI a missing service fails the run), then a fresh directory where every fault
 * suite records its figures (`recordFaultRun()`), read by the global teardown to print the report.
 */
export default async function globalSetup(): Promise<void> {
  await sharedGlobalSetup();
  process.env.OUTBOX_FAULTS_REPORT_DIR = mkdtempSync(join(tmpdir(), 'outbox-faults-'));
}
