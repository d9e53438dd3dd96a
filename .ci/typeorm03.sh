#!/usr/bin/env bash
# Third CI job: the library on TypeORM 0.3 (the latest 0.3.x, which the peer range `^0.3.20` accepts and most apps
# still run) with Nest 11 on Node 20 — the main job runs TypeORM 1.
#
# Everything happens in a temp copy of the repo with its own node_modules, so the repo's node_modules (used
# concurrently by other runs) is never touched:
#   1. The copy's node_modules starts as a copy of the repo's (Nest 11, better-sqlite3 already built for Node 20).
#   2. The copy's package.json asks for typeorm ~0.3 and `npm install` swaps just that package (and its deps).
#   3. Jest runs the unit tests and the SQLite, PostgreSQL and MariaDB + RabbitMQ/TCP e2e suites there (all but the
#      NATS/MQTT/Redis transport suite, which does not depend on the TypeORM version), the README quick start and
#      the packed package test included.
set -euo pipefail
repo="$(cd "$(dirname "$0")/.." && pwd)"
# TYPEORM03_WORK_DIR=<dir> keeps the folder (and reuses its install) between runs, for working on this job.
if [[ -n "${TYPEORM03_WORK_DIR:-}" ]]; then
  work="$TYPEORM03_WORK_DIR"; mkdir -p "$work"
else
  work="$(mktemp -d "${TMPDIR:-/tmp}/outbox-typeorm03.XXXXXX")"
  trap 'rm -rf "$work"' EXIT
fi
export CI="${CI:-true}"
npm_flags=(--no-audit --no-fund --loglevel=error --prefer-offline)

echo "== typeorm03: copy of the repo in $work/repo (node $(node -v))"
mkdir -p "$work/repo"
rm -rf "$work/repo/src" "$work/repo/test"
# node_modules is left out even where it is a symlink (a git worktree): .gitignore's `node_modules/` skips folders only.
(cd "$repo" && git ls-files -z --cached --others --exclude-standard | grep -zv '^node_modules$' |
  xargs -0 -I{} sh -c 'test -e "{}" && printf "%s\0" "{}"' | tar --null -T - -cf -) | tar -xf - -C "$work/repo"
if [[ ! -d "$work/repo/node_modules/@nestjs/core" ]]; then
  mkdir -p "$work/repo/node_modules"
  cp -a "$(readlink -f "$repo/node_modules")/." "$work/repo/node_modules/"
fi
cd "$work/repo"

node - <<'JS'
const fs = require('fs');
const pkg = JSON.parse(fs.readFileSync('package.json', 'utf8'));
pkg.devDependencies.typeorm = '~0.3.20';
fs.writeFileSync('package.json', JSON.stringify(pkg, null, 2));
JS

echo "== typeorm03: npm install typeorm ~0.3 (the latest 0.3.x)"
npm install "${npm_flags[@]}"
version() { node -p "JSON.parse(require('fs').readFileSync('node_modules/$1/package.json', 'utf8')).version"; }
typeorm="$(version typeorm)"
[[ "$typeorm" == 0.3.* ]] || { echo "!! expected typeorm 0.3.x, got $typeorm" >&2; exit 1; }
for p in @nestjs/common @nestjs/core @nestjs/microservices @nestjs/typeorm @nestjs/schedule typeorm better-sqlite3; do
  echo "   $p $(version "$p")"
done

echo "== typeorm03: unit + e2e suites on typeorm $typeorm, Nest $(version @nestjs/core), Node $(node -v)"
npx jest --ci --testPathIgnorePatterns '/node_modules/' '/test/transports\.e2e-spec\.ts$' "$@"
