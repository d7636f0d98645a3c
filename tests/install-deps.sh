#!/bin/sh
# Installs the Debian packages memslope needs, only those that are missing:
#   install-deps.sh build   what `make` and `make demo` need
#   install-deps.sh all     that and every tool the tests use (`make check`)
# Runs apt-get update first: a fresh machine's package lists may be stale.
# Needs root (or sudo) when something is missing.
set -eu

# build: compilers (g++ for libstdc++, which the binary links for C++
# demangling, and for the C++ fixtures), libunwind (the shim's unwinder),
# elfutils (symbols; memslope links it statically, with the archives of the
# compression libraries it uses: zlib, liblzma, libbz2), uthash, libdeflate
# (trace checksums), zlib (pprof).
build="gcc g++ make libunwind-dev libelf-dev libdw-dev liblzma-dev libbz2-dev uthash-dev libdeflate-dev zlib1g-dev"
# tests: cmocka, valgrind (memcheck cross-checks), clang's libFuzzer, python3
# (JSON checks, the C-extension fixture), linux-perf (memslope perf),
# golang-go (go tool pprof reads our pprof files back), chromium (the HTML
# report in a headless browser), binutils and xz-utils (a test library with
# MiniDebugInfo), libtcmalloc-minimal4 and libjemalloc2 (C++ operators served
# by another allocator), sqlite3 and git (real programs compared with memcheck).
tests="pkg-config libcmocka-dev valgrind clang libclang-rt-dev python3 python3-dev
linux-perf golang-go chromium procps coreutils binutils xz-utils
libtcmalloc-minimal4 libjemalloc2 sqlite3 git"

case "${1:-all}" in
build) packages=$build what="the build" ;;
all)   packages="$build $tests" what="the build and the tests" ;;
*)     echo "usage: install-deps.sh [build|all]" >&2; exit 2 ;;
esac
[ -n "${MEMSLOPE_EXTRA_DEPS:-}" ] && packages="$packages $MEMSLOPE_EXTRA_DEPS"

missing=""
for p in $packages; do
    dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing="$missing $p"
done
[ -z "$missing" ] && exit 0

echo "make deps: installing what $what need:$missing"
sudo=""
if [ "$(id -u)" -ne 0 ]; then
    command -v sudo >/dev/null 2>&1 || {
        echo "make deps: missing packages:$missing; run as root or install them with apt-get" >&2
        exit 1
    }
    sudo=sudo
fi
export DEBIAN_FRONTEND=noninteractive
$sudo apt-get update -q
# shellcheck disable=SC2086
$sudo apt-get install -y -q --no-install-recommends $missing
