#!/usr/bin/env bash
# scripts/extended-tests.sh [asan|tsan|soak|all]
#
# The long checks CI does not run (they would take it past its time limit on
# 2 cores); their last results are in docs/benchmarks.md ("Sanitizers and
# the teardown stress"):
#   1. every test binary under AddressSanitizer + UndefinedBehaviorSanitizer
#      (scripts/sanitize.sh asan), then the teardown stress tests under them:
#      500 cycles per transport of a Node torn down right after its peer was
#      SIGKILLed, and 200 of a probe agent SIGTERMed right after its peer was;
#   2. the threaded layers (net, coord, store, ps, comm, train) under
#      ThreadSanitizer (scripts/sanitize.sh tsan),
#      then the Node teardown stress at 500 cycles per transport under it;
#   3. the chaos soak, `tenax bench soak --minutes 60` (TENAX_SOAK_MINUTES),
#      its report in soak.json.
# Exit code: non-zero if any part failed; every part runs regardless.
set -uo pipefail
cd "$(dirname "$0")/.."
what=${1:-all}
cycles=${TENAX_TEARDOWN_CYCLES:-500}
failed=()

run() {  # run NAME COMMAND...
  local name=$1
  shift
  echo "=== $name"
  local start=$SECONDS
  if "$@"; then
    echo "=== $name: passed in $((SECONDS - start)) s"
  else
    echo "=== $name: FAILED (exit $?) after $((SECONDS - start)) s"
    failed+=("$name")
  fi
}

stress() {  # stress BUILD_DIR: nodes torn down after a lost peer; with the tenax binary, probe agents too
  TENAX_TEARDOWN_CYCLES=$cycles "$1/tests/net_tests" --gtest_filter='*NodeTeardownStress*' || return 1
  if [ -x "$1/tests/cluster_tests" ]; then
    TENAX_PROBE_TEARDOWN_CYCLES=${TENAX_PROBE_TEARDOWN_CYCLES:-200} "$1/tests/cluster_tests" \
      --gtest_filter='*AnAgentStoppedRightAfterItsPeerWasKilled*'
  fi
}

case "$what" in
  asan | tsan | soak | all) ;;
  *)
    echo "usage: scripts/extended-tests.sh [asan|tsan|soak|all]" >&2
    exit 2
    ;;
esac

if [[ $what == asan || $what == all ]]; then
  run "asan + ubsan, every test binary" bash scripts/sanitize.sh asan
  run "teardown stress, $cycles cycles per transport, asan" stress build-asan
fi
if [[ $what == tsan || $what == all ]]; then
  run "tsan, net coord store ps comm train" bash scripts/sanitize.sh tsan
  run "teardown stress, $cycles cycles per transport, tsan" stress build-tsan
fi
if [[ $what == soak || $what == all ]]; then
  # The README's build (scripts/test.sh builds build-test/).
  minutes=${TENAX_SOAK_MINUTES:-60}
  run "chaos soak, $minutes minutes" build-test/src/tenax bench soak --minutes "$minutes" --json soak.json
fi

if [ ${#failed[@]} -gt 0 ]; then
  printf 'failed: %s\n' "${failed[@]}"
  exit 1
fi
echo "all extended checks passed"
