#!/usr/bin/env bash
# Side by side on this machine: the wall time of `npx vitest run` on BASE and on this checkout,
# alternating base / head, ROUNDS times (issue 17: "npm test takes no longer than today").
# BASE defaults to 1e87434, the last commit on main before issue 17's work (the node service
# split, merged as 440df2c, was its first part). The base runs in a temporary git worktree that
# uses this checkout's node_modules. Each line: seconds, exit code, load average before, vitest's
# test counts. Usage: bash test/bench/suite-duration.sh [BASE]   (ROUNDS=2 for two rounds)
# SAME_FILES=1 also runs, on this checkout, only the test files BASE had (at the same paths): the
# same tests' duration before and after, apart from the files added since.
set -u
BASE=${1:-1e87434}
ROUNDS=${ROUNDS:-1}
ROOT=$(git rev-parse --show-toplevel)
OLD=$(mktemp -d /tmp/weft-suite-base-XXXXXX)
rmdir "$OLD"
git -C "$ROOT" worktree add --detach "$OLD" "$BASE" >/dev/null 2>&1 || { echo "cannot check out $BASE" >&2; exit 1; }
ln -s "$ROOT/node_modules" "$OLD/node_modules"
trap 'git -C "$ROOT" worktree remove --force "$OLD" >/dev/null 2>&1' EXIT
LOGS=$(mktemp -d /tmp/weft-suite-logs-XXXXXX)

BASE_FILES=$(git -C "$OLD" ls-files '*.test.ts' | tr '\n' ' ')

run() {
  local dir=$1 label=$2 load t0 rc
  shift 2
  load=$(cut -d' ' -f1-3 /proc/loadavg)
  t0=$(date +%s)
  (cd "$dir" && npx vitest run "$@" >"$LOGS/$label.log" 2>&1)
  rc=$?
  echo "$label: $(($(date +%s) - t0)) s, exit $rc, load before: $load; $(sed 's/\x1b\[[0-9;]*m//g' "$LOGS/$label.log" | grep -E '^ +Tests ' | tail -1 | tr -s ' ')"
}

echo "base $BASE ($(git -C "$ROOT" log -1 --format=%h "$BASE")) vs head $(git -C "$ROOT" log -1 --format=%h HEAD); logs in $LOGS"
for i in $(seq 1 "$ROUNDS"); do
  run "$OLD" "base-$i"
  run "$ROOT" "head-$i"
  # shellcheck disable=SC2086
  [ "${SAME_FILES:-0}" = 1 ] && run "$ROOT" "head-base-files-$i" $BASE_FILES
done
