#!/usr/bin/env bash
# Builds a release's files into dist/: tenax_<version>_amd64.deb,
# tenax-bench_<version>_amd64.deb and SHA256SUMS over both. These are what a
# release publishes (the repository's releases page); a user checks them with
#   sha256sum -c SHA256SUMS
# in the folder holding the downloads before `apt-get install ./tenax_*.deb`.
# BUILD=DIR uses another build folder (default build-release: Release, no tests).
set -euo pipefail
cd "$(dirname "$0")/.."
BUILD="${BUILD:-build-release}"
bash scripts/install-deps.sh --build  # no test tools: -DTENAX_TESTS=OFF below
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=Release -DTENAX_TESTS=OFF -DTENAX_FUZZ=OFF
fi
cmake --build "$BUILD" -j"$(nproc)" --target package
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")"
mkdir -p dist
rm -f dist/*.deb dist/SHA256SUMS
cp "$BUILD/tenax_${version}_amd64.deb" "$BUILD/tenax-bench_${version}_amd64.deb" dist/
(cd dist && sha256sum ./*.deb | sed 's| \./| |' >SHA256SUMS && sha256sum -c SHA256SUMS)
echo "dist/: $(ls dist | tr '\n' ' ')"
