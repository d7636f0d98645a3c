#!/bin/sh
# Runs libFuzzer targets on their seed corpora, from the repository root.
#   run.sh smoke BIN...          about 20 s in total, shared between the targets
#   run.sh long BIN [SECONDS]    one target for SECONDS (default 600)
# Each target's seeds are tests/fuzz/corpus/<name without fuzz_>/; inputs it
# finds go to build/fuzz-corpus/<name>/ (not committed) and crashes to
# build/fuzz-artifacts/. Prints a closing "fuzz: N passed, N failed" line.
cd "$(dirname "$0")/../.." || exit 2
mode=${1:-}
[ $# -ge 1 ] && shift
case "$mode" in
smoke) [ $# -ge 1 ] || { echo "usage: run.sh smoke BIN..." >&2; exit 2; }
       seconds=$((20 / $#)); [ "$seconds" -ge 2 ] || seconds=2 ;;
long)  [ $# -ge 1 ] || { echo "usage: run.sh long BIN [SECONDS]" >&2; exit 2; }
       seconds=${2:-600}; set -- "$1" ;;
*)     echo "usage: run.sh smoke BIN... | run.sh long BIN [SECONDS]" >&2; exit 2 ;;
esac

passed=0 failed=0
mkdir -p build/fuzz-artifacts
for bin in "$@"; do
    name=$(basename "$bin")
    seeds="tests/fuzz/corpus/${name#fuzz_}"
    found="build/fuzz-corpus/$name"
    mkdir -p "$found"
    [ -d "$seeds" ] || seeds=""
    echo "fuzz: $name for ${seconds}s (seeds: ${seeds:-none})"
    # shellcheck disable=SC2086
    if "$bin" -max_total_time="$seconds" -timeout=10 -rss_limit_mb=2048 -print_final_stats=1 \
        -artifact_prefix="build/fuzz-artifacts/$name-" "$found" $seeds >"build/fuzz-artifacts/$name.log" 2>&1; then
        passed=$((passed + 1))
        grep -a -E "stat::number_of_executed_units|Done [0-9]+ runs" "build/fuzz-artifacts/$name.log" | tail -n 2
    else
        failed=$((failed + 1))
        echo "FAILED: $name (log: build/fuzz-artifacts/$name.log)" >&2
        tail -n 40 "build/fuzz-artifacts/$name.log" >&2
    fi
done
echo "fuzz: $passed passed, $failed failed"
[ "$failed" -eq 0 ]
