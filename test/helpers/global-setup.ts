import { findChromium } from './find-chromium';
import { isReachable, SERVICES, ServiceName } from './services';

/**
 * Probes the shared services once. Under CI (`CI=true`) a missing service fails the whole run, so no suite can
 * pass by skipping; on a developer machine the suites that need it are reported as skipped instead.
 */
export default async function globalSetup(): Promise<void> {
  const names = Object.keys(SERVICES) as ServiceName[];
  const results = await Promise.all(names.map(async (n) => [n, await isReachable(n)] as const));
  const down = results.filter(([, ok]) => !ok).map(([n]) => n);
  if (down.length > 0 && process.env.CI === 'true') {
    throw new Error(
      `Services not reachable under CI: ${down.join(', ')}. .ci/run starts them; see FIELD-NOTES for the commands.`,
    );
  }
  process.env.OUTBOX_TEST_DOWN_SERVICES = down.join(',');
  // The browser tests' Chromium, unpacked once here rather than by each worker (see test/helpers/browser.ts).
  const chromium = await findChromium();
  if (chromium.path) process.env.OUTBOX_TEST_CHROMIUM = chromium.path;
  else process.env.OUTBOX_TEST_CHROMIUM_PROBLEM = chromium.problem;
  if (down.length > 0)
    console.warn(`\n[nestjs-outbox tests] services down, their suites are skipped: ${down.join(', ')}\n`);
}
