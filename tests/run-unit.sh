#!/bin/bash
# Runs the unit-test binaries given, UNIT_JOBS at a time (default: one per
# core); each is a cmocka program built with ASan and UBSan. A binary's output
# (its tests' deliberate error messages among it) is kept and printed whole
# only when it fails. Prints one closing line over binaries and tests.
cd "$(dirname "$0")/.." || exit 2
. tests/pool.sh
jobs=${UNIT_JOBS:-$(pool_cores)}
logs=$(mktemp -d "${TMPDIR:-/tmp}/memslope-unit.XXXXXX") || exit 2
trap 'rm -rf "$logs"' EXIT

# In the background: one binary; its output in $logs/NAME.log, status in NAME.rc.
start_binary() {
    local name
    name=$(basename "$1")
    ASAN_OPTIONS=detect_leaks=1:abort_on_error=0 UBSAN_OPTIONS=print_stacktrace=1 timeout 300 "$1" \
        >"$logs/$name.log" 2>&1 </dev/null
    echo $? >"$logs/$name.rc"
}

passed=0 failed=0 tests=0 failures=""
finish_binary() {
    local name rc count
    name=$(basename "$1")
    rc=$(cat "$logs/$name.rc")
    count=$(sed -n 's/^\[==========\] \([0-9]*\) test(s) run\.$/\1/p' "$logs/$name.log" | awk '{ n += $1 } END { print n + 0 }')
    tests=$((tests + count))
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
    else
        failed=$((failed + 1)) failures="$failures $name"
        [ "$rc" -eq 124 ] && echo "FAIL  $name: timed out after 300s" || echo "FAIL  $name (exit $rc)"
        sed 's/^/    | /' "$logs/$name.log"
    fi
}

start=$(date +%s)
pool_run "$jobs" start_binary finish_binary "$@"
echo "unit: $passed programs passed, $failed failed ($tests tests) in $(($(date +%s) - start))s${failures:+; failed:$failures}"
[ "$failed" -eq 0 ]
