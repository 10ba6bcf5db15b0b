#!/usr/bin/env bash
# The README's first command: install what tenax needs, build it, and run
# examples/cloud.toml: 4 elastic workers on an emulated 2-zone cloud, the
# training data in an erasure-coded store of 6 data nodes, a worker killed
# and one preempted (both replaced), a data node killed with its disk wiped
# (PRM recovery), a persistent straggler, and the fault-free reference run
# first. A few minutes on 2 cores. TENAX_JOB=examples/quickstart.toml runs
# the short variant. Outputs go to runs/cloud/ (override with TENAX_OUT=DIR):
# summary.json, metrics.jsonl, report.html (open it in a browser).
set -euo pipefail
cd "$(dirname "$0")/.."

bash scripts/install-deps.sh
cmake -S . -B build -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENAX_FUZZ=OFF > build.log 2>&1 || { cat build.log; exit 1; }
echo "building tenax (log: build.log) ..."
cmake --build build -j"$(nproc)" --target tenax >> build.log 2>&1 || { tail -50 build.log; exit 1; }

job="${TENAX_JOB:-examples/cloud.toml}"
out="${TENAX_OUT:-runs/$(basename "$job" .toml)}"
./build/src/tenax run "$job" --out "$out"
echo
cat "$out/summary.json"
echo
echo "report: $out/report.html"
