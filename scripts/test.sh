#!/usr/bin/env bash
# The README's second command (and CI's): install what tenax needs, build
# everything with warnings as errors, and run the whole test suite: unit
# tests, end-to-end CLI tests and short libFuzzer runs of every decoder.
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build-test -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENAX_WERROR=ON -DTENAX_FUZZ=ON
cmake --build build-test -j"$(nproc)"
cd build-test
ctest --output-on-failure -j"$(nproc)" --timeout 600
