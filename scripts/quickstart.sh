#!/usr/bin/env bash
# The README's first command: install what tenax needs, build it, and run the
# quickstart job: a coordinator and 2 worker processes on this machine train
# the CNN on Fashion-MNIST data-parallel (examples/quickstart.toml).
# Outputs go to runs/quickstart/ (override with TENAX_OUT=DIR).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENAX_FUZZ=OFF > build.log 2>&1 || { cat build.log; exit 1; }
echo "building tenax (log: build.log) ..."
cmake --build build -j"$(nproc)" --target tenax >> build.log 2>&1 || { tail -50 build.log; exit 1; }

out="${TENAX_OUT:-runs/quickstart}"
./build/src/tenax run examples/quickstart.toml --out "$out"
echo
cat "$out/summary.json"
