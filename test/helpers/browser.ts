import { existsSync } from 'node:fs';
import { join } from 'node:path';

/** Debian's Chromium (`apt-get install chromium`; .ci/run installs it when missing). */
export const CHROMIUM = '/usr/bin/chromium';
/** Where screenshots go (git-ignored); docs/images/ holds copies of them. */
export const SCREENSHOTS = join(__dirname, '..', '..', 'test-output');
/** Headless, and no background traffic into the closed network (see FIELD-NOTES). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

function playwright(): typeof import('playwright-core') | undefined {
  try {
    // eslint-disable-next-line @typescript-eslint/no-require-imports
    return require('playwright-core') as typeof import('playwright-core');
  } catch {
    return undefined;
  }
}

/** playwright-core, when installed. */
export const pw = playwright();

/** What a browser test lacks on this machine (empty when it can run). */
export const missingForBrowser = [!existsSync(CHROMIUM) && CHROMIUM, !pw && 'playwright-core'].filter(
  (x): x is string => typeof x === 'string',
);

/**
 * Registers `title` with one test saying what is missing, in place of a browser suite that cannot run: under CI a
 * missing browser fails the run; on a developer machine the suite says what to install.
 */
export function describeMissingBrowser(title: string): void {
  describe(title, () => {
    it(`needs ${missingForBrowser.join(' and ')}`, () => {
      if (process.env.CI === 'true') {
        throw new Error(`The browser test needs ${missingForBrowser.join(' and ')}: see .ci/run.`);
      }
      console.warn(`SKIPPED ${title}: ${missingForBrowser.join(' and ')} missing`);
    });
  });
}
