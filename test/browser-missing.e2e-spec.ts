import { spawnSync } from 'node:child_process';
import { join } from 'node:path';

/**
 * The browser tests never pass by skipping under CI: with no usable Chromium (here, `OUTBOX_TEST_CHROMIUM` naming a
 * file that does not exist) the console's browser suite fails, and its message says how to get one.
 */
describe('The console browser test without a browser', () => {
  it('fails under CI=true, naming what is missing and the fix', () => {
    const root = join(__dirname, '..');
    const run = spawnSync(
      process.execPath,
      [join(root, 'node_modules', 'jest', 'bin', 'jest.js'), '--ci', 'test/console-browser.e2e-spec.ts'],
      {
        cwd: root,
        encoding: 'utf8',
        env: { ...process.env, CI: 'true', OUTBOX_TEST_CHROMIUM: '/nonexistent/chromium' },
        timeout: 60_000,
      },
    );
    const output = `${run.stdout}${run.stderr}`;
    expect(run.error).toBeUndefined();
    expect(run.status).toBe(1);
    expect(output).toContain('needs a Chromium binary (OUTBOX_TEST_CHROMIUM=/nonexistent/chromium does not exist)');
    expect(output).toContain('Run `npm ci` (it installs playwright-core and @sparticuz/chromium)');
    expect(output).not.toMatch(/Tests:.*\d+ passed/);
  });
});
