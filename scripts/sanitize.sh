#!/usr/bin/env bash
# scripts/sanitize.sh asan|tsan [ctest arguments...]
#
# Builds tenax, its tests and its peers with sanitizers in their own build
# folder and runs the tests under them:
#   asan  AddressSanitizer + UndefinedBehaviorSanitizer (and LeakSanitizer),
#         every test binary (build-asan/): unit, cluster, CLI, storage, ...
#   tsan  ThreadSanitizer over the threaded layers (build-tsan/): net,
#         coord, store, ps, comm and train (the exchanges: sync, elastic,
#         coded, async; the loop, the data sources).
# The Python package is not built (its module would need the sanitizer's
# runtime preloaded into an uninstrumented python3) and the libFuzzer targets
# are not either (CI already runs them under ASan + UBSan).
# libtorch, OpenMP, UCX and the system libraries are not instrumented; what
# they report is kept out by scripts/sanitizers/*.supp, one reason per entry.
# Extra arguments go to ctest, e.g. `scripts/sanitize.sh asan -R Transport`.
# Exit code: ctest's (non-zero when any test failed or a sanitizer reported).
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd)
mode=${1:-}
[ $# -gt 0 ] && shift
case "$mode" in
  asan)
    san=address dir=build-asan
    targets=(all)
    labels=()
    ;;
  tsan)
    san=thread dir=build-tsan
    # comm and train link libtorch and its OpenMP (libgomp), which are not
    # instrumented: libgomp's barriers are futexes TSan cannot see, so
    # torch's own parallel regions run on one thread here (OMP_NUM_THREADS
    # below); tenax's threads (the Node's, the input pipeline's, the
    # exchanges' hooks) are what these binaries are run for.
    tsan_binaries=(net_tests coord_tests store_tests ps_tests comm_tests train_tests)
    targets=(net_test_peer "${tsan_binaries[@]}")
    labels=(-L "^($(IFS='|'; echo "${tsan_binaries[*]}"))\$")
    ;;
  *)
    echo "usage: scripts/sanitize.sh asan|tsan [ctest arguments...]" >&2
    exit 2
    ;;
esac

if [ "${TENAX_SKIP_DEPS:-0}" != 1 ]; then bash scripts/install-deps.sh; fi
cmake -S . -B "$dir" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENAX_SANITIZE="$san" -DTENAX_FUZZ=OFF -DTENAX_PYTHON=OFF
cmake --build "$dir" -j"$(nproc)" --target "${targets[@]}"

# UCX's memory hooks (libucm) patch mmap/madvise/brk; a thread that exits
# under TSan calls madvise through that hook after TSan tore down its state,
# and segfaults in __tsan::MutexPreReadLock (every test that starts a thread
# next to a UCX context did). The sanitizers interpose the same calls, so
# UCX's hooks stay off under them (CI and tenax itself run with them on).
export UCX_MEM_MMAP_HOOK_MODE=none UCX_MEM_MALLOC_HOOKS=no
supp="$root/scripts/sanitizers"
export ASAN_OPTIONS="detect_leaks=1:check_initialization_order=1:detect_stack_use_after_return=0"
export LSAN_OPTIONS="suppressions=$supp/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1:suppressions=$supp/ubsan.supp"
if [ "$mode" = tsan ]; then export OMP_NUM_THREADS=1; fi
# ignore_noninstrumented_modules: libtorch, its OpenMP (libgomp), OpenBLAS,
# oneDNN and spdlog's shared library are not instrumented; their memcpy,
# memset, malloc and free reach TSan's interceptors while the barriers and
# static-init guards that order them do not (libgomp's futexes, inlined
# guard loads), so every parallel region and every lazily built singleton
# read as a race. With the flag, only accesses from instrumented code (all of
# tenax, the tests, the header-only parts of the libraries) are checked.
export TSAN_OPTIONS="suppressions=$supp/tsan.supp:second_deadlock_stack=1:history_size=4:ignore_noninstrumented_modules=1"
cd "$dir"
# Sanitized code runs 2-10x slower: a longer per-test limit than CI's.
ctest --output-on-failure -j"$(nproc)" --timeout 1800 "${labels[@]}" "$@"
