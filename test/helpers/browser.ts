import { existsSync } from 'node:fs';
import { join } from 'node:path';

/**
 * The Chromium the browser tests drive, found once per run by the global setup (`findChromium()`) and handed to the
 * workers in `OUTBOX_TEST_CHROMIUM`: the binary of the npm package `@sparticuz/chromium` (a devDependency, so
 * `npm ci` is all a fresh machine needs), or the one that variable names when it is set beforehand (for example
 * Debian's `/usr/bin/chromium`).
 */
export const CHROMIUM = process.env.OUTBOX_TEST_CHROMIUM ?? '';
/** Where screenshots go (git-ignored); docs/images/ holds copies of them. */
export const SCREENSHOTS = join(__dirname, '..', '..', 'test-output');
/**
 * Headless, and no background traffic into the closed network (see FIELD-NOTES). The package's own launch flags are
 * not used: they turn web security off, which the console's cross-site checks must not run without.
 */
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
export const missingForBrowser = [
  !(CHROMIUM && existsSync(CHROMIUM)) &&
    `a Chromium binary (${process.env.OUTBOX_TEST_CHROMIUM_PROBLEM ?? 'none found'})`,
  !pw && 'playwright-core',
].filter((x): x is string => typeof x === 'string');

/**
 * Registers `title` with one test saying what is missing, in place of a browser suite that cannot run: under CI a
 * missing browser fails the run; on a developer machine the suite says what to install.
 */
export function describeMissingBrowser(title: string): void {
  describe(title, () => {
    it(`needs ${missingForBrowser.join(' and ')}`, () => {
      if (process.env.CI === 'true') {
        throw new Error(
          `The browser test needs ${missingForBrowser.join(' and ')}. Run \`npm ci\` (it installs playwright-core and ` +
            '@sparticuz/chromium), or set OUTBOX_TEST_CHROMIUM to a Chromium binary.',
        );
      }
      console.warn(`SKIPPED ${title}: ${missingForBrowser.join(' and ')} missing`);
    });
  });
}
