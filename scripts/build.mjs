#!/usr/bin/env node
/**
 * Builds the dual package: `tsc` twice, CommonJS into <out>/cjs and ES modules into <out>/esm, each with its
 * type declarations and a package.json marker ({"type": …}) so Node reads every file in the right format.
 *
 *   node scripts/build.mjs            → ./dist (what `npm run build` does)
 *   node scripts/build.mjs <outDir>   → another folder (the package test builds into a temp folder)
 *
 * The sources import relative files without extensions (as TypeScript's CommonJS output allows), but Node's
 * ES module loader needs full paths. So after the ESM compile the relative specifiers of the emitted .js and
 * .d.ts files are rewritten to the file they resolve to (`./x` → `./x.js` or `./x/index.js`), and deep imports
 * into packages (`@nestjs/microservices/deserializers/…`) get `.js`, which both Nest 11 (no `exports` map) and
 * Nest 12 (`"./*.js"` export) accept.
 */
import { execFileSync } from 'node:child_process';
import { existsSync, mkdirSync, readdirSync, readFileSync, rmSync, statSync, writeFileSync } from 'node:fs';
import { createRequire } from 'node:module';
import { dirname, join, resolve } from 'node:path';
import { fileURLToPath } from 'node:url';

const root = resolve(dirname(fileURLToPath(import.meta.url)), '..');
const out = resolve(process.argv[2] ?? join(root, 'dist'));
const tsc = createRequire(join(root, 'package.json')).resolve('typescript/bin/tsc');

rmSync(out, { recursive: true, force: true });
const compile = (project, dir) =>
  execFileSync(process.execPath, [tsc, '-p', join(root, project), '--outDir', join(out, dir)], {
    cwd: root,
    stdio: 'inherit',
  });
compile('tsconfig.build.json', 'cjs');
compile('tsconfig.build.esm.json', 'esm');

writeFileSync(join(out, 'cjs', 'package.json'), '{ "type": "commonjs" }\n');
writeFileSync(join(out, 'esm', 'package.json'), '{ "type": "module" }\n');

const SPECIFIER = /(\bfrom\s*|\bimport\s*\(\s*|\bimport\s+)(['"])([^'"]+)\2/g;

function withExtension(file, specifier) {
  if (specifier.startsWith('.')) {
    if (/\.(c|m)?js$/.test(specifier)) return specifier;
    const target = resolve(dirname(file), specifier);
    if (existsSync(`${target}.js`) || existsSync(`${target}.d.ts`)) return `${specifier}.js`;
    if (existsSync(join(target, 'index.js')) || existsSync(join(target, 'index.d.ts'))) return `${specifier}/index.js`;
    throw new Error(`${file}: cannot resolve ${specifier}`);
  }
  const parts = specifier.split('/');
  const deep = specifier.startsWith('@') ? parts.length > 2 : parts.length > 1;
  if (deep && !specifier.startsWith('node:') && !/\.(c|m)?js(on)?$/.test(specifier)) return `${specifier}.js`;
  return specifier;
}

function rewrite(dir) {
  for (const name of readdirSync(dir)) {
    const file = join(dir, name);
    if (statSync(file).isDirectory()) rewrite(file);
    else if (name.endsWith('.js') || name.endsWith('.d.ts')) {
      const text = readFileSync(file, 'utf8');
      const next = text.replace(
        SPECIFIER,
        (_m, lead, quote, spec) => `${lead}${quote}${withExtension(file, spec)}${quote}`,
      );
      if (next !== text) writeFileSync(file, next);
    }
  }
}
rewrite(join(out, 'esm'));
mkdirSync(out, { recursive: true });
console.log(`built ${out}/cjs and ${out}/esm`);
