#!/usr/bin/env bash
# Installs every Debian package tenax needs to build, test and benchmark.
# Idempotent: when everything is already installed it returns in well under a
# second without touching the network.
set -euo pipefail

PACKAGES=(
  # toolchain
  build-essential cmake pkg-config ccache clang-14 libclang-rt-14-dev
  # core
  libtomlplusplus-dev libcli11-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
  # train. Debian's libtorch calls whatever libblas.so.3 the alternatives
  # system provides; the default reference BLAS makes matmul ~17x slower.
  # OpenBLAS's OpenMP flavour shares libtorch's libgomp thread pool.
  libtorch-dev dataset-fashion-mnist libopenblas0-openmp
  # net: UCX transport, protobuf control messages, HMAC handshake
  libucx-dev libssl-dev protobuf-compiler libprotobuf-dev
  # tests and micro-benchmarks
  libgtest-dev libgmock-dev libbenchmark-dev
  # peers for benchmarks (PyTorch on the same kernels)
  python3 python3-torch python3-numpy
  # the RPC peer of the transport benchmark
  libgrpc++-dev protobuf-compiler-grpc
  # coord: the coordinator's state
  libsqlite3-dev
  # core checksums (CRC-32C) and the store's Reed-Solomon coding
  libisal-dev
  # mpirun launches workers; MPI and Gloo are the allreduce benchmark's peers
  openmpi-bin libopenmpi-dev libgloo-dev
)

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
