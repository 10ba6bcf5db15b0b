#!/bin/bash
# Run on a Debian 12 machine (this project's dev/CI machines): downloads the
# Debian packages the GPU machine lacks (docs/gpu.md) into .gpu-debs/ in the
# repository root (git-ignored). That folder travels to the GPU machine with
# the tree, where scripts/gpu/build.sh unpacks them (nothing can be
# downloaded there).
set -euo pipefail
cd "$(dirname "$0")/../.."
packages=(libucx0 libucx-dev libtomlplusplus3 libtomlplusplus-dev libcpp-httplib0.11 libcpp-httplib-dev
          libbrotli1 libbrotli-dev libsqlite3-dev libisal2 libisal-dev libssl-dev dataset-fashion-mnist)
mkdir -p .gpu-debs
cd .gpu-debs
if ! apt-get download "${packages[@]}" >/dev/null 2>&1; then
  apt-get update -qq
  apt-get download "${packages[@]}"
fi
ls -1 *.deb | wc -l | xargs echo "debs in .gpu-debs:"
du -sh . | cut -f1 | xargs echo "size:"
