#!/bin/bash
# Runs the end-to-end tests (tests/e2e/test_*.sh) from the repository root,
# E2E_JOBS at a time (default: one per core), the longest first by the
# durations of the last run (build/e2e-durations), each under a timeout.
# Contract for a test script: exit 0 = pass, 77 = skipped (say why as the
# last line), anything else = fail. Each gets these variables:
#   MEMSLOPE  path of the memslope binary     FIXTURES  built fixtures folder
#   WORK      a scratch folder of its own (removed when it passes)
# and may source tests/e2e/lib.sh for helpers. A test's output is kept in
# $WORK/.log and printed whole only when it fails. A test that must run
# with no other beside it says so in a "# e2e: alone (why)" line. Select with
# E2E_FILTER='glob ...' (a test matching any of them); E2E_VERBOSE=1 also
# names every test that passed.
cd "$(dirname "$0")/../.." || exit 2
root=$(pwd)
. tests/pool.sh
export MEMSLOPE="$root/build/bin/memslope" FIXTURES="$root/build/fixtures"
per_test_timeout=${E2E_TIMEOUT:-180}
jobs=${E2E_JOBS:-$(pool_cores)}
durations=build/e2e-durations
results=$(mktemp -d "${TMPDIR:-/tmp}/memslope-e2e-results.XXXXXX") || exit 2
trap 'rm -rf "$results"' EXIT

# The selected tests, longest first; a test without a past duration first
# of all, as it may be the longest.
selected() {
    local t name glob
    for t in tests/e2e/test_*.sh; do
        set -f # the globs are matched against names, not expanded against files
        name=$(basename "$t" .sh)
        for glob in ${E2E_FILTER:-*}; do
            # shellcheck disable=SC2254
            case "$name" in $glob) echo "$name" && break ;; esac
        done
        set +f
    done | awk -v past="$durations" '
        BEGIN { while ((getline line < past) > 0) { split(line, f, " "); seconds[f[2]] = f[1] } }
        { print ($1 in seconds ? seconds[$1] : 999999), $1 }' | sort -k1,1nr -k2 | cut -d' ' -f2
}

# In the background: one test; "STATUS SECONDS WORK" into $results/NAME.
start_test() {
    local name=$1 work start rc
    work=$(mktemp -d "${TMPDIR:-/tmp}/memslope-e2e.$name.XXXXXX") || { echo "2 0 -" >"$results/$name"; return; }
    start=$(date +%s)
    WORK=$work timeout -k 10 "$per_test_timeout" sh "tests/e2e/$name.sh" >"$work/.log" 2>&1 </dev/null
    rc=$?
    echo "$rc $(($(date +%s) - start)) $work" >"$results/$name"
}

passed=0 failed=0 skipped=0 failures=""
finish_test() {
    local name=$1 rc secs work
    read -r rc secs work <"$results/$name"
    echo "$secs $name" >>"$results/.durations"
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        [ -z "${E2E_VERBOSE:-}" ] || echo "PASS  $name (${secs}s)"
        rm -rf "$work"
    elif [ "$rc" -eq 77 ]; then
        skipped=$((skipped + 1))
        echo "SKIP  $name: $(tail -n 1 "$work/.log")"
        rm -rf "$work"
    else
        failed=$((failed + 1)) failures="$failures $name"
        if [ "$rc" -eq 124 ]; then
            echo "FAIL  $name: timed out after ${per_test_timeout}s (scratch folder: $work)"
        else
            echo "FAIL  $name (exit $rc, ${secs}s; scratch folder: $work)"
        fi
        sed 's/^/    | /' "$work/.log" 2>/dev/null
    fi
}

# The durations just measured replace the old ones of the same tests.
save_durations() {
    [ -d build ] || return 0
    awk -v past="$durations" '
        { seen[$2] = 1; print }
        END { while ((getline line < past) > 0) { split(line, f, " "); if (!(f[2] in seen)) print line } }' \
        "$results/.durations" >"$durations.new" && mv "$durations.new" "$durations"
}

start=$(date +%s)
mapfile -t tests < <(selected)
[ ${#tests[@]} -gt 0 ] || { echo "e2e: no test matches E2E_FILTER='${E2E_FILTER:-}'" >&2; exit 2; }
# A test with a "# e2e: alone" line (saying why) runs after the others, by itself.
together=() alone=()
for name in "${tests[@]}"; do
    if grep -q '^# e2e: alone' "tests/e2e/$name.sh"; then alone+=("$name"); else together+=("$name"); fi
done
: >"$results/.durations"
pool_run "$jobs" start_test finish_test "${together[@]}"
pool_run 1 start_test finish_test "${alone[@]}"
save_durations
echo "e2e: $passed passed, $failed failed, $skipped skipped in $(($(date +%s) - start))s ($jobs at a time)${failures:+; failed:$failures}"
[ "$failed" -eq 0 ]
