#!/usr/bin/env bash
# Builds tenax's container image without any image registry and runs it:
#
#   1. the tenax and tenax-bench .deb files (`--target package`) from a build
#      folder (BUILD=build-test by default; configured here if it is missing);
#   2. a Debian bookworm root filesystem made by debootstrap from the Debian
#      archive, imported into podman as localhost/tenax-base:bookworm
#      (cached under IMAGE_CACHE, /var/tmp/tenax-image by default);
#   3. deploy/Dockerfile's runtime stage on that base with the prebuilt
#      tenax .deb (apt-get resolves its Depends from the archive), tagged
#      tenax:<version>;
#   4. checks on the image: `tenax --version`, nothing of the build stage or
#      the benchmark peers inside, one-line errors for a missing secret file
#      and a job file naming a path that is only in the source tree, apt
#      naming the missing dependencies when the archive is out of reach;
#   5. the quickstart (examples/quickstart.toml, as installed in
#      /usr/share/tenax/examples) inside the container (--shm-size=1g: UCX's
#      shared memory between its processes; the default 64 MiB is refused in
#      one line), its workers as processes there, ending above
#      ACCURACY_FLOOR (0.80);
#   6. on the bare base with the dependencies in apt's cache: the time from
#      `apt-get install ./tenax_<version>_amd64.deb` (with its Recommends,
#      as a user runs it) to the end of the quickstart.
#
# FROM_SOURCE=1 builds every stage of deploy/Dockerfile instead (the build
# stage compiles the checked-in HEAD inside the container); step 1 still
# builds the packages here for steps 4-6.
#
# Prints the sizes and times it measured and writes them, as JSON, to
# $OUT/image-test.json (OUT=runs/image-test by default). Needs root (podman).
# Not part of CI (see README, "Container image"): it takes about 10 minutes
# with a warm build folder.
set -euo pipefail
cd "$(dirname "$0")/.."
root="$PWD"

BUILD="${BUILD:-build-test}"
IMAGE_CACHE="${IMAGE_CACHE:-/var/tmp/tenax-image}"
OUT="${OUT:-runs/image-test}"
ACCURACY_FLOOR="${ACCURACY_FLOOR:-0.80}"

say() { echo "image-test: $*"; }
now_ms() { echo $(($(date +%s%N) / 1000000)); }
secs() { printf "%d.%03d" $(($1 / 1000)) $(($1 % 1000)); }  # milliseconds as seconds
fail() { echo "image-test: FAILED: $*" >&2; exit 1; }
[ "$(id -u)" = 0 ] || fail "run as root (podman builds and runs the image)"

# --- what the test needs from Debian ---------------------------------------
bash scripts/install-deps.sh
need=()
for p in podman runc debootstrap; do dpkg -s "$p" >/dev/null 2>&1 || need+=("$p"); done
if [ ${#need[@]} -gt 0 ]; then
  say "installing ${need[*]}"
  apt-get update -q && DEBIAN_FRONTEND=noninteractive apt-get install -y -q "${need[@]}" >/dev/null
fi

# These machines allow neither raising a resource limit (no CAP_SYS_RESOURCE)
# nor crun's cgroups in hybrid mode: runc, and limits no higher than ours.
nofile="$(ulimit -Hn)"; [ "$nofile" = unlimited ] && nofile=1048576
[ "$nofile" -gt 65536 ] && nofile=65536
PODMAN=(podman --runtime runc)
LIMITS=(--ulimit "nofile=$nofile:$nofile" --ulimit nproc=8192:8192)

# --- 1. the packages ---------------------------------------------------------
if [ ! -f "$BUILD/CMakeCache.txt" ]; then
  say "configuring $BUILD"
  cmake -S . -B "$BUILD" -DCMAKE_BUILD_TYPE=RelWithDebInfo -DTENAX_FUZZ=OFF >/dev/null
fi
say "building the packages in $BUILD"
t0=$(now_ms)
flock /tmp/tenax-build.lock cmake --build "$BUILD" -j"$(nproc)" --target package >"$BUILD/package.log" 2>&1 ||
  { tail -30 "$BUILD/package.log"; fail "cmake --build $BUILD --target package (log: $BUILD/package.log)"; }
version="$(sed -n 's/^CMAKE_PROJECT_VERSION:STATIC=//p' "$BUILD/CMakeCache.txt")"
deb="$BUILD/tenax_${version}_amd64.deb"
bench_deb="$BUILD/tenax-bench_${version}_amd64.deb"
[ -f "$deb" ] && [ -f "$bench_deb" ] || fail "no $deb or $bench_deb after --target package"
deb_bytes=$(stat -c %s "$deb"); bench_deb_bytes=$(stat -c %s "$bench_deb")
say "packages: $deb ($((deb_bytes / 1024 / 1024)) MiB), $bench_deb ($((bench_deb_bytes / 1024 / 1024)) MiB)"

# --- 2. the base image, from the Debian archive -------------------------------
mkdir -p "$IMAGE_CACHE"
if [ ! -f "$IMAGE_CACHE/rootfs.done" ]; then
  say "debootstrap bookworm into $IMAGE_CACHE/rootfs"
  rm -rf "$IMAGE_CACHE/rootfs"
  debootstrap --variant=minbase bookworm "$IMAGE_CACHE/rootfs" http://deb.debian.org/debian >"$IMAGE_CACHE/debootstrap.log" 2>&1 ||
    { tail -20 "$IMAGE_CACHE/debootstrap.log"; fail "debootstrap (log: $IMAGE_CACHE/debootstrap.log)"; }
  rm -f "$IMAGE_CACHE/imported"
  touch "$IMAGE_CACHE/rootfs.done"
fi
base=localhost/tenax-base:bookworm
if [ ! -f "$IMAGE_CACHE/imported" ] || ! podman image exists "$base"; then
  say "importing the root filesystem as $base"
  tar -C "$IMAGE_CACHE/rootfs" -c . | podman import - "$base" >/dev/null
  touch "$IMAGE_CACHE/imported"
fi

# --- 3. the runtime stage with the prebuilt .deb -------------------------------
ctx="$(mktemp -d /var/tmp/tenax-image-context.XXXXXX)"
work="$(mktemp -d /var/tmp/tenax-image-run.XXXXXX)"
cleanup() { rm -rf "$ctx" "$work"; }
trap cleanup EXIT
mkdir -p "$ctx/debs"
cp "$deb" "$ctx/debs/"
image="tenax:$version"
if [ "${FROM_SOURCE:-0}" = 1 ]; then
  # Every stage: the build stage compiles this commit (git archive HEAD) with
  # scripts/release.sh inside the container (19 minutes on 2 cores, 2026-11-29).
  src_ctx="$work/source"
  mkdir -p "$src_ctx"
  git archive HEAD | tar -x -C "$src_ctx"
  say "building $image from source (deploy/Dockerfile, all stages, on $base; log $OUT/build.log)"
  build_args=(--build-arg "BASE=$base" "$src_ctx")
else
  say "building $image (deploy/Dockerfile with a context of prebuilt packages, on $base)"
  build_args=(--build-arg "BASE=$base" "$ctx")
fi
t_build=$(now_ms)
mkdir -p "$OUT"
"${PODMAN[@]}" build "${LIMITS[@]}" --network host -f "$root/deploy/Dockerfile" -t "$image" "${build_args[@]}" \
  >"$OUT/build.log" 2>&1 || { tail -30 "$OUT/build.log"; fail "podman build (log: $OUT/build.log)"; }
build_s=$(secs $(($(now_ms) - t_build)))
image_bytes=$(podman image inspect "$image" --format '{{.Size}}')
base_bytes=$(podman image inspect "$base" --format '{{.Size}}')
say "$image: $((image_bytes / 1024 / 1024)) MiB (the base: $((base_bytes / 1024 / 1024)) MiB), built in ${build_s%.*} s"

run() { "${PODMAN[@]}" run --rm "${LIMITS[@]}" --network host "$@"; }

# --- 4. checks ------------------------------------------------------------------
got="$(run "$image" --version)"
[ "$got" = "tenax $version" ] || fail "tenax --version in the image printed '$got', want 'tenax $version'"
say "tenax --version: $got"

# Nothing of the build stage or the benchmark peers. (libgloo0 is there:
# Debian's libtorch1.13 itself depends on it; the Gloo peer program is not.)
leftovers="$(run --entrypoint sh "$image" -c '
  for p in g++ gcc c++ cc cmake make ccache protoc mpirun iperf3 tenax-bench; do command -v "$p"; done
  ls -d /src /usr/lib/tenax/tenax-bench /usr/lib/tenax/tenax_bench_* /usr/lib/tenax/bench-files 2>/dev/null
  ls /usr/lib/x86_64-linux-gnu | grep -E "^lib(grpc|mpi|gtest|benchmark)[^/]*\.so" || true
  dpkg-query -W -f "\${Package}\n" |
    grep -E "^(build-essential|cmake|(gcc|g\+\+|cpp)(-[0-9]+)?|.*-dev|libgrpc.*|.*openmpi.*|tenax-bench)$" || true' 2>&1)"
[ -z "$leftovers" ] || fail "the runtime image holds build or benchmark files:
$leftovers"
say "no compilers, sources, tenax-bench or benchmark peers in the image"

# A role without its secret: one line naming the file it looked for.
set +e
err="$(run "$image" coordinator --job /usr/share/tenax/examples/sync.toml --state "$(mktemp -u /tmp/s.XXXX)" 2>&1 >/dev/null)"
rc=$?
set -e
[ "$rc" != 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == *"/run/secrets/tenax/secret"* ]] ||
  fail "a coordinator without its secret: exit $rc, want one line naming /run/secrets/tenax/secret; got:
$err"
say "no secret mounted: $err"

# A job file naming a path that is only in the source tree.
set +e
err="$(run "$image" train --config /usr/share/tenax/examples/own_data.toml --out /tmp/o 2>&1 >/dev/null)"
rc=$?
set -e
[ "$rc" != 0 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == *"own_data/train_images.npy"* ]] ||
  fail "a job naming a missing file: exit $rc, want one line naming own_data/train_images.npy; got:
$err"
say "a path only in the source tree: $err"

# A machine whose apt cannot find the dependencies (no package lists, no
# network): apt refuses and names each one.
set +e
err="$("${PODMAN[@]}" run --rm "${LIMITS[@]}" --network none -v "$ctx/debs:/debs:ro" "$base" \
  sh -c 'rm -rf /var/lib/apt/lists/*; apt-get install -y /debs/tenax_*_amd64.deb' 2>&1)"
rc=$?
set -e
[ "$rc" != 0 ] && [[ "$err" == *"Depends: dataset-fashion-mnist but it is not installable"* ]] &&
  [[ "$err" == *"Depends: libtorch1.13"*"but it is not installable"* ]] ||
  fail "installing without the dependencies: exit $rc, want apt naming dataset-fashion-mnist and libtorch1.13; got:
$err"
say "without the dependencies, apt names $(printf '%s\n' "$err" | grep -c 'Depends: .* not installable') of them, e.g. $(
  printf '%s\n' "$err" | grep -m1 'Depends:' | sed 's/^ *//')"

# A container's default /dev/shm (64 MiB) is too small for the quickstart's
# 18 processes: one line naming --shm-size, before anything starts.
set +e
err="$(run "$image" run /usr/share/tenax/examples/quickstart.toml --out /tmp/q 2>&1 >/dev/null)"
rc=$?
set -e
[ "$rc" = 2 ] && [ "$(printf '%s\n' "$err" | wc -l)" = 1 ] && [[ "$err" == *"/dev/shm has"*"--shm-size"* ]] ||
  fail "the quickstart in a 64 MiB /dev/shm: exit $rc, want 2 and one line naming --shm-size; got:
$err"
say "default /dev/shm: $err"

# --- 5. the quickstart inside the container -----------------------------------
mkdir -p "$work/runs"
say "running the quickstart in the container (about two minutes)"
t_q=$(now_ms)
run --shm-size=1g -v "$work/runs:/var/lib/tenax/runs" "$image" run /usr/share/tenax/examples/quickstart.toml \
  --out runs/q >"$work/quickstart.log" 2>&1 ||
  { tail -30 "$work/quickstart.log"; mkdir -p "$OUT"; cp -r "$work/runs" "$OUT/failed-runs";
    fail "tenax run quickstart in the container (its run folder: $OUT/failed-runs)"; }
quickstart_s=$(secs $(($(now_ms) - t_q)))
acc="$(python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["final_test_accuracy"])' "$work/runs/q/summary.json")"
python3 -c "import sys; sys.exit(0 if float('$acc') > float('$ACCURACY_FLOOR') else 1)" ||
  fail "the quickstart in the container ended at accuracy $acc, under the floor $ACCURACY_FLOOR"
say "quickstart in the container: test accuracy $acc (floor $ACCURACY_FLOOR), ${quickstart_s%.*} s"
# --- 6. a fresh machine: apt-get install ./tenax_*.deb, then the quickstart ---
# On the bare base, with the dependencies' .deb files already in apt's cache
# (downloaded first, not timed): the time a user waits from the install
# command to the quickstart's last line.
say "timing apt-get install ./tenax_${version}_amd64.deb + the quickstart on the bare base (dependencies cached)"
"${PODMAN[@]}" run --rm "${LIMITS[@]}" --network host --shm-size=1g -v "$ctx/debs:/debs:ro" "$base" sh -c '
  set -e
  apt-get update -q >/dev/null
  apt-get install -y -q --download-only /debs/tenax_*_amd64.deb >/dev/null
  t0=$(date +%s%N)
  apt-get install -y -q /debs/tenax_*_amd64.deb >/tmp/install.log 2>&1 || { tail -20 /tmp/install.log; exit 1; }
  t1=$(date +%s%N)
  cd /tmp && tenax run /usr/share/tenax/examples/quickstart.toml --out runs/q >/tmp/q.log 2>&1 || { tail -20 /tmp/q.log; exit 1; }
  t2=$(date +%s%N)
  echo "install_ms=$(((t1 - t0) / 1000000)) quickstart_ms=$(((t2 - t1) / 1000000))"
  grep -o "\"final_test_accuracy\": *[0-9.]*" runs/q/summary.json' >"$work/fresh.log" 2>&1 ||
  { tail -30 "$work/fresh.log"; fail "install + quickstart on the bare base"; }
install_ms=$(sed -n 's/^install_ms=\([0-9]*\) .*/\1/p' "$work/fresh.log")
fresh_quickstart_ms=$(sed -n 's/.*quickstart_ms=\([0-9]*\)$/\1/p' "$work/fresh.log")
fresh_acc=$(sed -n 's/.*"final_test_accuracy": *//p' "$work/fresh.log")
[ -n "$install_ms" ] && [ -n "$fresh_quickstart_ms" ] && [ -n "$fresh_acc" ] || { cat "$work/fresh.log"; fail "no times or accuracy"; }
python3 -c "import sys; sys.exit(0 if float('$fresh_acc') > float('$ACCURACY_FLOOR') else 1)" ||
  fail "the quickstart after apt-get install ended at accuracy $fresh_acc, under the floor $ACCURACY_FLOOR"
say "apt-get install (with Recommends) $(secs "$install_ms") s, then the quickstart $(secs "$fresh_quickstart_ms") s, accuracy $fresh_acc"
total_s=$(secs $(($(now_ms) - t0)))

mkdir -p "$OUT"
cat >"$OUT/image-test.json" <<JSON
{"version": "$version", "from_source": ${FROM_SOURCE:-0}, "deb_bytes": $deb_bytes, "bench_deb_bytes": $bench_deb_bytes,
 "image": "$image", "image_bytes": $image_bytes, "base_bytes": $base_bytes,
 "image_build_seconds": ${build_s}, "quickstart_seconds": ${quickstart_s},
 "quickstart_accuracy": $acc, "install_seconds": $(secs "$install_ms"),
 "install_to_quickstart_end_seconds": $(secs $((install_ms + fresh_quickstart_ms))),
 "fresh_quickstart_accuracy": $fresh_acc, "total_seconds": ${total_s}}
JSON
cp "$work/quickstart.log" "$OUT/quickstart.log"
say "passed; $OUT/image-test.json"
