import { execFileSync } from 'node:child_process';
import { copyFileSync, mkdirSync, readdirSync, symlinkSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';

/** The repository's root folder. */
export const REPO_ROOT = join(__dirname, '..', '..');

/** The tarball `npm pack` made, and the paths it holds. */
export interface PackedPackage {
  tarball: string;
  files: string[];
}

/**
 * Builds the package with `scripts/build.mjs` (what `npm run build` runs) into `<work>/package/dist` — never the
 * shared dist/ — and packs it with `npm pack` into `work`.
 */
export function buildAndPack(work: string): PackedPackage {
  const pkg = join(work, 'package');
  mkdirSync(pkg, { recursive: true });
  copyFileSync(join(REPO_ROOT, 'package.json'), join(pkg, 'package.json'));
  copyFileSync(join(REPO_ROOT, 'README.md'), join(pkg, 'README.md'));
  try {
    execFileSync(process.execPath, [join(REPO_ROOT, 'scripts', 'build.mjs'), join(pkg, 'dist')], {
      stdio: 'pipe',
      encoding: 'utf8',
    });
  } catch (error) {
    const { stdout, stderr } = error as { stdout?: string; stderr?: string };
    throw new Error(`The build (scripts/build.mjs) failed:\n${stdout ?? ''}${stderr ?? ''}`);
  }
  const packed = JSON.parse(
    execFileSync('npm', ['pack', '--ignore-scripts', '--json', '--pack-destination', work], {
      cwd: pkg,
      encoding: 'utf8',
    }),
  )[0];
  return { tarball: join(work, packed.filename), files: packed.files.map((f: { path: string }) => f.path) };
}

/**
 * Makes `app` an installed app: the tarball is unpacked into `app/node_modules/nestjs-outbox` the way npm installs
 * it, and every other package (the peers, the drivers, TypeScript) is a symlink to this repo's node_modules — no
 * registry, no network, a second or two.
 */
export function installPackedApp(app: string, packed: PackedPackage, name = 'outbox-smoke-app'): void {
  const installed = join(app, 'node_modules', 'nestjs-outbox');
  mkdirSync(installed, { recursive: true });
  execFileSync('tar', ['-xzf', packed.tarball, '-C', installed, '--strip-components=1']);
  for (const entry of readdirSync(join(REPO_ROOT, 'node_modules'))) {
    if (entry.startsWith('.') || entry === 'nestjs-outbox') continue;
    symlinkSync(join(REPO_ROOT, 'node_modules', entry), join(app, 'node_modules', entry));
  }
  writeFileSync(join(app, 'package.json'), JSON.stringify({ name, private: true }));
}
