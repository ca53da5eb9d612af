#!/usr/bin/env bash
# Issue 17: `npm test` beside two CPU-bound processes. Clones this checkout's HEAD into a fresh
# directory, installs it (`npm ci`), starts two busy loops at normal priority, runs `npm test`
# there and prints its exit code, wall time, the load before and after and the summary lines.
# Usage: bash test/bench/suite-beside-hogs.sh [RUNS]   (RUNS in a row, default 1; stops at a failure)
set -u
RUNS=${1:-1}
ROOT=$(git rev-parse --show-toplevel)
for n in $(seq 1 "$RUNS"); do
  DIR=$(mktemp -d /tmp/weft-hogs-XXXXXX)
  git clone -q "$ROOT" "$DIR" || exit 1
  ( while :; do :; done ) & H1=$!
  ( while :; do :; done ) & H2=$!
  trap 'kill $H1 $H2 2>/dev/null' EXIT
  echo "run $n of $(git -C "$DIR" log -1 --format=%h) in $DIR, start $(date -u +%T), load $(cut -d' ' -f1-3 /proc/loadavg)"
  (cd "$DIR" && npm ci >npm-ci.log 2>&1) || { echo "npm ci failed: $DIR/npm-ci.log"; exit 1; }
  t0=$(date +%s)
  (cd "$DIR" && npm test >test.log 2>&1)
  rc=$?
  kill $H1 $H2 2>/dev/null
  echo "run $n: npm test exit $rc in $(($(date +%s) - t0)) s, load $(cut -d' ' -f1-3 /proc/loadavg)"
  sed 's/\x1b\[[0-9;]*m//g' "$DIR/test.log" | grep -E '^ +(Test Files|Tests) | passed | failed| flaky' | tail -6
  [ $rc = 0 ] || exit $rc
done
