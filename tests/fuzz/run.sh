#!/bin/bash
# Runs libFuzzer targets on their seed corpora, from the repository root.
#   run.sh smoke BIN...          20 s of fuzzing in all, shared between the
#                                targets, FUZZ_JOBS at once (default: one per core)
#   run.sh long BIN [SECONDS]    one target for SECONDS (default 600)
# Each target's seeds are tests/fuzz/corpus/<name without fuzz_>/; inputs it
# finds go to build/fuzz-corpus/<name>/ (not committed) and crashes to
# build/fuzz-artifacts/, with its log (its end is printed when it fails).
# Prints a closing "fuzz: N passed, N failed" line.
cd "$(dirname "$0")/../.." || exit 2
. tests/pool.sh
mode=${1:-}
[ $# -ge 1 ] && shift
jobs=${FUZZ_JOBS:-$(pool_cores)}
case "$mode" in
smoke) [ $# -ge 1 ] || { echo "usage: run.sh smoke BIN..." >&2; exit 2; }
       seconds=$((20 / $#)); [ "$seconds" -ge 2 ] || seconds=2 ;;
long)  [ $# -ge 1 ] || { echo "usage: run.sh long BIN [SECONDS]" >&2; exit 2; }
       seconds=${2:-600}; set -- "$1"; jobs=1 ;;
*)     echo "usage: run.sh smoke BIN... | run.sh long BIN [SECONDS]" >&2; exit 2 ;;
esac
artifacts=build/fuzz-artifacts
mkdir -p "$artifacts"

# In the background: one target for $seconds; its log and status in $artifacts.
start_target() {
    local bin=$1 name seeds found
    name=$(basename "$bin")
    seeds="tests/fuzz/corpus/${name#fuzz_}"
    found="build/fuzz-corpus/$name"
    mkdir -p "$found"
    [ -d "$seeds" ] || seeds=""
    echo "fuzz: $name for ${seconds}s (seeds: ${seeds:-none})" >"$artifacts/$name.log"
    # shellcheck disable=SC2086
    "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="$artifacts/$name-" "$found" $seeds >>"$artifacts/$name.log" 2>&1 </dev/null
    echo $? >"$artifacts/$name.rc"
}

passed=0 failed=0 runs=0 failures=""
finish_target() {
    local name rc count
    name=$(basename "$1")
    rc=$(cat "$artifacts/$name.rc")
    count=$(sed -n 's/^stat::number_of_executed_units: *\([0-9]*\).*/\1/p' "$artifacts/$name.log" | tail -n 1)
    runs=$((runs + ${count:-0}))
    if [ "$rc" -eq 0 ]; then
        passed=$((passed + 1))
        [ "$mode" = smoke ] || grep -a -E "stat::number_of_executed_units|Done [0-9]+ runs" "$artifacts/$name.log" | tail -n 2
    else
        failed=$((failed + 1)) failures="$failures $name"
        echo "FAIL  $name (exit $rc; log: $artifacts/$name.log)"
        tail -n 60 "$artifacts/$name.log" | sed 's/^/    | /'
    fi
}

start=$(date +%s)
pool_run "$jobs" start_target finish_target "$@"
echo "fuzz: $passed passed, $failed failed ($runs inputs, ${seconds}s a target) in $(($(date +%s) - start))s${failures:+; failed:$failures}"
[ "$failed" -eq 0 ]
