import { execFile } from 'node:child_process';
import { existsSync } from 'node:fs';
import { promisify } from 'node:util';

/**
 * Finds the Chromium of the browser tests, once per run (called by the global setup): `OUTBOX_TEST_CHROMIUM` when
 * it is set, else the binary that the npm package `@sparticuz/chromium` unpacks (to the temp folder, on first use).
 * The package is an ES module, so it is asked in a child Node process rather than through Jest's module registry.
 * Resolves the path, or what went wrong, for the tests to report (a failure under CI, never a skip).
 */
export async function findChromium(): Promise<{ path?: string; problem?: string }> {
  const set = process.env.OUTBOX_TEST_CHROMIUM;
  if (set) return existsSync(set) ? { path: set } : { problem: `OUTBOX_TEST_CHROMIUM=${set} does not exist` };
  const script =
    "const m = await import('@sparticuz/chromium'); process.stdout.write(await (m.default ?? m).executablePath());";
  try {
    const { stdout } = await promisify(execFile)(process.execPath, ['--input-type=module', '-e', script], {
      cwd: process.cwd(),
      timeout: 120_000,
    });
    const path = stdout.trim();
    return existsSync(path) ? { path } : { problem: `@sparticuz/chromium answered ${path}, which does not exist` };
  } catch (error) {
    return { problem: `@sparticuz/chromium could not unpack its binary: ${String(error).split('\n')[0]}` };
  }
}
