#!/usr/bin/env bash
# Installs every Debian package tenax needs to build, test and benchmark.
# Idempotent: when everything is already installed it returns in well under a
# second without touching the network.
#
#   install-deps.sh          everything (the README's commands, CI)
#   install-deps.sh --build  only what building the Debian packages needs
#                            (scripts/release.sh, deploy/Dockerfile's build
#                            stage): no test tools, browsers, servers or npm
set -euo pipefail

mode=all
case "${1:-}" in
  "") ;;
  --build) mode=build ;;
  -h|--help) sed -n '2,9p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
  *) echo "install-deps: unknown argument '$1' (use --build, --help or nothing)" >&2; exit 2 ;;
esac

# What `cmake --build B --target package` needs with -DTENAX_TESTS=OFF
# -DTENAX_FUZZ=OFF: tenax, its Python package and tenax-bench with its peers.
PACKAGES=(
  # toolchain
  build-essential cmake pkg-config ccache
  # the Debian packages (CPack's DEB generator runs dpkg-shlibdeps from
  # dpkg-dev and needs `file` to find the binaries; help2man renders the man
  # pages from --help)
  dpkg-dev file help2man
  # core
  libtomlplusplus-dev libcli11-dev libspdlog-dev nlohmann-json3-dev zlib1g-dev
  # train
  libtorch-dev
  # net: UCX transport, protobuf control messages, HMAC handshake
  libucx-dev libssl-dev protobuf-compiler libprotobuf-dev
  # the Python package (src/python: pybind11 module, torch.distributed
  # backend), and PyTorch for the benchmarks' peers
  python3 python3-torch python3-numpy python3-dev pybind11-dev
  # tenax-bench's peers: gRPC (transport), MPI and Gloo (allreduce)
  libgrpc++-dev protobuf-compiler-grpc openmpi-bin libopenmpi-dev libgloo-dev
  # sched: the Kubernetes scheduler extender's HTTP server
  libcpp-httplib-dev
  # coord: the coordinator's state
  libsqlite3-dev
  # core checksums (CRC-32C) and the store's Reed-Solomon coding
  libisal-dev
)
if [ "$mode" = all ]; then
  PACKAGES+=(
    # the libFuzzer targets
    clang-14 libclang-rt-14-dev
    # the dataset the tests and jobs train on. Debian's libtorch calls
    # whatever libblas.so.3 the alternatives system provides; the default
    # reference BLAS makes matmul ~17x slower. OpenBLAS's OpenMP flavour
    # shares libtorch's libgomp thread pool.
    dataset-fashion-mnist libopenblas0-openmp
    # tests and micro-benchmarks, and the Python package's tests
    libgtest-dev libgmock-dev libbenchmark-dev python3-pytest
    # coord: the Prometheus server that tests/prometheus_scrape_test.cc runs
    # against the coordinator's /metrics (started by the test on loopback;
    # its Debian service is never started, see below)
    prometheus
    # the report's browser check (tests/report_browser_test.cc): headless chromium
    chromium
    # the raw TCP ceiling of `tenax bench allreduce --hosts` (its Debian
    # service is never started, see below); ip and tc make the hosts
    iperf3 iproute2
    # nft drops TCP packets at random in the TCP-streams loss test (net_tests)
    nftables
  )
fi
# tools/k8s-check (the Kubernetes schema test of `tenax k8s manifests`) runs
# on Node.js with npm: the machine's own when it has both (they may come
# from elsewhere than Debian's archive), else Debian's nodejs and npm.
if [ "$mode" = all ] && { ! command -v node >/dev/null 2>&1 || ! command -v npm >/dev/null 2>&1; }; then
  PACKAGES+=(nodejs npm)
fi

# The npm packages of tools/k8s-check, exactly as its package-lock.json pins
# them; skipped (no network) when node_modules came from this very lock file.
install_npm_deps() {
  [ "$mode" = all ] || return 0
  local dir
  dir="$(cd "$(dirname "$0")/.." && pwd)/tools/k8s-check"
  if [ -f "$dir/node_modules/.tenax-lock" ] && cmp -s "$dir/node_modules/.tenax-lock" "$dir/package-lock.json"; then
    echo "install-deps: tools/k8s-check npm packages present"
    return
  fi
  echo "install-deps: npm ci in tools/k8s-check"
  npm ci --prefix "$dir" --no-audit --no-fund
  cp "$dir/package-lock.json" "$dir/node_modules/.tenax-lock"
}

missing=()
for p in "${PACKAGES[@]}"; do
  if ! dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed"; then
    missing+=("$p")
  fi
done

if [ ${#missing[@]} -eq 0 ]; then
  echo "install-deps: all ${#PACKAGES[@]} packages present"
  install_npm_deps
  exit 0
fi

if [ "$(id -u)" -ne 0 ]; then
  echo "install-deps: missing packages (${missing[*]}); run as root" >&2
  exit 1
fi

echo "install-deps: installing ${missing[*]}"
export DEBIAN_FRONTEND=noninteractive
# Packages with a service (prometheus) must not start it: tests run their
# own instance on loopback, and no init system may be running here at all.
# A policy-rc.d answering 101 ("action forbidden") makes invoke-rc.d and
# deb-systemd-invoke skip every start during this install; one that is
# already present (Docker images ship one) is left alone.
policy=/usr/sbin/policy-rc.d
if [ ! -e "$policy" ]; then
  printf '#!/bin/sh\n# tenax install-deps: no service starts during package installation\nexit 101\n' >"$policy"
  chmod 755 "$policy"
  trap 'rm -f "$policy"' EXIT
fi
apt-get update -q
apt-get install -y -q --no-install-recommends "${PACKAGES[@]}"
install_npm_deps
