#!/usr/bin/env bash
# Runs one Jest selection <n> times in a row, each run a fresh Jest process, and stops at the first failure: a
# flake hunt, never a retry (a run that fails is reported as failed, with its log kept).
#
#   .ci/loop.sh <n> <jest args…>
#   .ci/loop.sh 50 test/outbox-handlers -t poison
#
# Run it where the selection should run (the repo, or the TypeORM 0.3 copy prepared by
# `TYPEORM03_WORK_DIR=<dir> bash .ci/typeorm03.sh --listTests`, in <dir>/repo). LOOP_LOG_DIR=<dir> keeps each run's
# log (default: a temp folder, printed); LOOP_KEEP_GOING=1 runs all <n> and counts the failures instead of stopping.
set -uo pipefail
[[ $# -ge 2 && "$1" =~ ^[0-9]+$ && "$1" -gt 0 ]] || {
  echo "usage: $0 <n> <jest args…>   e.g. $0 50 test/outbox-handlers -t poison" >&2
  exit 2
}
runs="$1"; shift
logs="${LOOP_LOG_DIR:-$(mktemp -d "${TMPDIR:-/tmp}/outbox-loop.XXXXXX")}"
mkdir -p "$logs"
export CI="${CI:-true}" # a missing service fails the run instead of skipping the suite
passed=0; failed=0
for ((i = 1; i <= runs; i++)); do
  log="$logs/run-$i.log"
  started=$(date +%s)
  if npx jest --ci "$@" >"$log" 2>&1; then
    # A selection that ran no test (a typo in -t) is not a pass.
    if grep -Eq '^Tests: .*[1-9][0-9]* passed' "$log"; then
      passed=$((passed + 1)); verdict=pass
    else
      failed=$((failed + 1)); verdict='FAIL (no test ran)'
    fi
  else
    failed=$((failed + 1)); verdict=FAIL
  fi
  echo "run $i/$runs: $verdict in $(($(date +%s) - started)) s ($(grep -E '^Tests:' "$log" | tail -1)) log: $log"
  if [[ "$verdict" != pass && "${LOOP_KEEP_GOING:-0}" != 1 ]]; then break; fi
done
echo "== loop: $passed passed, $failed failed of $runs runs ($*); logs in $logs"
[[ $failed -eq 0 && $passed -eq $runs ]]
