#!/bin/bash
# One command for the GPU machine: build (scripts/gpu/build.sh), the tests
# labelled gpu, then `tenax bench gpu --quick`, each stage writing its
# results into OUT_DIR (default gpu-results/) as soon as it ends, so that a
# visit cut short still brings back what ran. Stages: build, tests, bench
# (a list in STAGES, e.g. STAGES="build tests").
set -uo pipefail
cd "$(dirname "$0")/../.."
out=${OUT_DIR:-gpu-results}
stages=${STAGES:-build tests bench}
mkdir -p "$out"
nvidia-smi --query-gpu=name,memory.total,driver_version --format=csv,noheader >"$out/gpu.txt" 2>&1
status=0
stage() {  # name, command...
  local name=$1; shift
  local t0=$SECONDS
  "$@" >"$out/$name.log" 2>&1
  local rc=$?
  echo "$name: exit $rc in $((SECONDS - t0)) s" | tee -a "$out/stages.txt"
  [ $rc -eq 0 ] || status=1
  return $rc
}
for s in $stages; do
  case $s in
    build) stage build scripts/gpu/build.sh build-gpu || break ;;
    tests) stage tests bash -c "cd build-gpu && ctest -L gpu --output-on-failure --timeout 300" ;;
    # tenax bench gpu hands over to bench/gpu_bench.py; without tenax-bench
    # built (TENAX_TARGETS="tenax gpu_tests") the driver runs directly.
    # BENCH_ARGS: more arguments (--sections, --data-on-host-too, ...).
    # shellcheck disable=SC2086
    bench) if [ -x build-gpu/src/tenax-bench ]; then
             stage bench build-gpu/src/tenax bench gpu --quick --json "$out/bench-gpu.json" ${BENCH_ARGS:-}
           else
             stage bench env TENAX_BINARY=build-gpu/src/tenax PYTHONUNBUFFERED=1 python3 bench/gpu_bench.py --quick \
               --json "$out/bench-gpu.json" ${BENCH_ARGS:-}
           fi ;;
  esac
done
exit $status
