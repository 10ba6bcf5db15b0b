#!/bin/bash
# Builds tenax on the GPU machine (Ubuntu, a CUDA PyTorch wheel; docs/gpu.md):
# unpacks the Debian packages it lacks (.gpu-debs/, made by
# scripts/gpu/fetch-debs.sh on a Debian machine and carried with the tree)
# over / (the machine is thrown away afterwards), configures against the
# wheel's libtorch (cmake/TenaxTorchIncludes.cmake keeps the wheel's own
# protobuf and fmt headers away from tenax's targets) without the bench
# peers the machine lacks (gRPC, Gloo) and without the Python package, and
# builds tenax, tenax-bench and gpu_tests into build-gpu/.
# Usage: scripts/gpu/build.sh [build-dir]   (TENAX_JOBS: parallel jobs; TENAX_BUILD_TYPE;
# TENAX_TARGETS: the targets, default tenax tenax-bench gpu_tests)
set -euo pipefail
cd "$(dirname "$0")/../.."
build=${1:-build-gpu}
if ! ls .gpu-debs/*.deb >/dev/null 2>&1; then
  echo "build.sh: no .gpu-debs/*.deb: run scripts/gpu/fetch-debs.sh on a Debian machine and carry .gpu-debs" >&2
  exit 2
fi
for f in .gpu-debs/*.deb; do dpkg -x "$f" /; done
ldconfig
python=${PYTHON:-python3}
torch_prefix=$("$python" -c 'import torch; print(torch.utils.cmake_prefix_path)')
echo "torch $("$python" -c 'import torch; print(torch.__version__, torch.version.cuda)') at $torch_prefix"
generator=()
command -v ninja >/dev/null && generator=(-G Ninja)
cmake -S . -B "$build" "${generator[@]}" -DCMAKE_BUILD_TYPE="${TENAX_BUILD_TYPE:-RelWithDebInfo}" -DCMAKE_PREFIX_PATH="$torch_prefix" \
  -DTENAX_BENCH_PEERS=OFF -DTENAX_PYTHON=OFF -DTENAX_FUZZ=OFF -DTENAX_WERROR=OFF
# shellcheck disable=SC2086
cmake --build "$build" -j"${TENAX_JOBS:-$(nproc)}" --target ${TENAX_TARGETS:-tenax tenax-bench gpu_tests}
