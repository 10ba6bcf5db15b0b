#!/usr/bin/env bash
# The Debian packages as a user installs them (ctest: PackageTest). Builds
# both .deb files with cpack from this build folder into a scratch folder and
# checks, on their contents:
#   - tenax: the programs (and /usr/bin links that resolve to them), the
#     Python package, the examples, docs, CHANGELOG and man pages; no test
#     binaries, no tenax-bench, no benchmark peers; Depends computed from the
#     libraries (libtorch, UCX, ISA-L, SQLite...) plus the dataset and torch,
#     and none of the peers' libraries; "CPU-only" in the description;
#   - tenax-bench: tenax-bench, its peer programs and bench files, Depends on
#     exactly this version of tenax;
#   - every ELF file: no RPATH/RUNPATH (nothing points into a build folder);
#   - the extracted tenax prints the project's version, and its man page
#     documents `tenax run --out`.
# Usage: package_test.sh BUILD_DIR VERSION
set -euo pipefail
build="$1"
version="$2"
scratch="$(mktemp -d "${TMPDIR:-/tmp}/tenax-package-test.XXXXXX")"
trap 'rm -rf "$scratch"' EXIT
failures=0
fail() { echo "FAIL: $*" >&2; failures=$((failures + 1)); }
want_line() {  # FILE PATTERN WHAT: some line of FILE matches the extended regex
  grep -Eq -- "$2" "$1" || fail "$3 (no line matching '$2' in $(basename "$1"))"
}
no_line() {
  if grep -Eq -- "$2" "$1"; then fail "$3: $(grep -E -- "$2" "$1" | head -3 | tr '\n' ' ')"; fi
}

cpack --config "$build/CPackConfig.cmake" -B "$scratch/out" >"$scratch/cpack.log" 2>&1 ||
  { cat "$scratch/cpack.log"; echo "FAIL: cpack" >&2; exit 1; }
deb="$scratch/out/tenax_${version}_amd64.deb"
bench="$scratch/out/tenax-bench_${version}_amd64.deb"
for f in "$deb" "$bench"; do [ -f "$f" ] || { ls "$scratch/out" >&2; echo "FAIL: cpack made no $(basename "$f")" >&2; exit 1; }; done

# --- tenax: file list ---
# dpkg-deb -c: mode owner size date time path [-> target]; keep path [-> target].
files_of() { dpkg-deb -c "$1" | awk '{ $1 = $2 = $3 = $4 = $5 = ""; sub(/^ +/, ""); print }'; }
files_of "$deb" >"$scratch/tenax.files"
want_line "$scratch/tenax.files" '^\./usr/lib/tenax/tenax$' "the tenax program"
want_line "$scratch/tenax.files" '^\./usr/bin/tenax -> \.\./lib/tenax/tenax$' "/usr/bin/tenax links to the program"
want_line "$scratch/tenax.files" '^\./usr/lib/python3/dist-packages/tenax/__init__\.py$' "the Python package"
want_line "$scratch/tenax.files" '^\./usr/lib/python3/dist-packages/tenax/_tenax\..*\.so$' "the Python extension module"
want_line "$scratch/tenax.files" '^\./usr/lib/python3/dist-packages/tenax/torch/elastic\.py$' "tenax.torch"
want_line "$scratch/tenax.files" '^\./usr/share/tenax/examples/quickstart\.toml$' "the quickstart example"
want_line "$scratch/tenax.files" '^\./usr/share/tenax/examples/prices/gcp-c2-standard-8-us-central1-spot-workers\.toml$' \
  "the quickstart's price file, beside it as the job names it"
want_line "$scratch/tenax.files" '^\./usr/share/doc/tenax/CHANGELOG\.md$' "the changelog"
want_line "$scratch/tenax.files" '^\./usr/share/doc/tenax/docs/config\.md$' "the docs"
want_line "$scratch/tenax.files" '^\./usr/share/man/man1/tenax\.1\.gz$' "tenax(1)"
want_line "$scratch/tenax.files" '^\./usr/share/man/man1/tenax-run\.1\.gz$' "tenax-run(1)"
want_line "$scratch/tenax.files" '^\./usr/share/man/man1/tenax-k8s\.1\.gz$' "tenax-k8s(1)"
no_line "$scratch/tenax.files" '(_test|_tests|gtest|fuzz|tenax-bench|tenax_bench|bench-files|__pycache__)' \
  "test, fuzz or benchmark files in the tenax package"
no_line "$scratch/tenax.files" '(build-|CMakeFiles|\.o$|\.a$)' "build files in the tenax package"

# --- tenax: control ---
dpkg-deb -f "$deb" Package Version Architecture Depends Description >"$scratch/tenax.control"
want_line "$scratch/tenax.control" "^Version: ${version//./\\.}$" "the package version is the project version"
want_line "$scratch/tenax.control" '^Architecture: amd64$' "amd64"
want_line "$scratch/tenax.control" 'CPU-only' "the description says CPU-only"
depends="$(dpkg-deb -f "$deb" Depends | tr ',' '\n' | sed 's/^ *//')"
echo "$depends" >"$scratch/tenax.depends"
for d in 'libtorch1\.13' 'libucx0' 'libisal2' 'libsqlite3-0' 'libprotobuf32' 'libssl3' 'dataset-fashion-mnist' 'libc6 '; do
  want_line "$scratch/tenax.depends" "^$d" "tenax Depends on $d"
done
dpkg-deb -f "$deb" Recommends | tr ',' '\n' | sed 's/^ *//' >"$scratch/tenax.recommends"
want_line "$scratch/tenax.recommends" '^python3-torch$' "tenax Recommends python3-torch (tenax.torch)"
no_line "$scratch/tenax.depends" '(grpc|gloo|openmpi|libmpi|gtest|benchmark)' "tenax Depends on a benchmark peer or test library"

# --- tenax-bench ---
files_of "$bench" >"$scratch/bench.files"
want_line "$scratch/bench.files" '^\./usr/lib/tenax/tenax-bench$' "tenax-bench"
want_line "$scratch/bench.files" '^\./usr/bin/tenax-bench -> \.\./lib/tenax/tenax-bench$' "/usr/bin/tenax-bench"
want_line "$scratch/bench.files" '^\./usr/lib/tenax/tenax_bench_socket_ring$' "the plain-socket peer beside tenax-bench"
want_line "$scratch/bench.files" '^\./usr/lib/tenax/bench-files/resnet50_shapes\.txt$' "the bench files beside tenax-bench"
want_line "$scratch/bench.files" '^\./usr/share/man/man1/tenax-bench\.1\.gz$' "tenax-bench(1)"
no_line "$scratch/bench.files" '^\./usr/lib/tenax/tenax$' "the tenax program twice (it belongs to the tenax package)"
dpkg-deb -f "$bench" Depends | tr ',' '\n' | sed 's/^ *//' >"$scratch/bench.depends"
want_line "$scratch/bench.depends" "^tenax \\(= ${version//./\\.}\\)$" "tenax-bench Depends on this very tenax"

# --- every ELF: no RPATH or RUNPATH; the program runs and knows its version ---
mkdir -p "$scratch/x"
dpkg-deb -x "$deb" "$scratch/x"
dpkg-deb -x "$bench" "$scratch/x"
elves=0
while IFS= read -r -d '' f; do
  if [ "$(head -c 4 "$f" | od -An -c | tr -d ' ')" = '177ELF' ]; then
    elves=$((elves + 1))
    if readelf -d "$f" | grep -Eq '\((RPATH|RUNPATH)\)'; then fail "$f has $(readelf -d "$f" | grep -E 'RPATH|RUNPATH')"; fi
    if strings -a "$f" | grep -Fq "$build/"; then fail "$f holds the build folder's path $build/"; fi
  fi
done < <(find "$scratch/x" -type f -print0)
[ "$elves" -ge 4 ] || fail "only $elves ELF files in the packages (tenax, tenax-bench, the Python module, peers)"
got="$("$scratch/x/usr/lib/tenax/tenax" --version)"
[ "$got" = "tenax $version" ] || fail "the packaged tenax --version printed '$got', want 'tenax $version'"
zcat "$scratch/x/usr/share/man/man1/tenax-run.1.gz" >"$scratch/tenax-run.1"
want_line "$scratch/tenax-run.1" '\\-\\-out' "tenax-run(1) documents --out"
want_line "$scratch/tenax-run.1" "^\\.TH TENAX-RUN \"1\" .*\"tenax-run ${version//./\\.}\"" "tenax-run(1) names the version"

echo "tenax: $(stat -c %s "$deb") bytes, $(wc -l <"$scratch/tenax.files") files; tenax-bench: $(stat -c %s "$bench") bytes"
echo "tenax Depends: $(echo "$depends" | tr '\n' ' ')"
[ "$failures" = 0 ] || { echo "$failures check(s) failed" >&2; exit 1; }
echo "PASS"
