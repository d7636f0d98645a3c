#!/bin/sh
# world_stops.sh - how long each stop of the program lasts while memslope
# records issue 14's extension driver: uprobes on the tracer's
# world_stop_begin and world_stop_end (perf probe; needs root and a
# memslope built with symbols, as `make` builds it).
#
#   bench/world_stops.sh [MEMSLOPE] [RUNS]
#
# One line a run: the total and each stop in ms (the first is the entry
# breakpoint's, then each case end, then the exit). Run from the
# repository root after `make fixtures`.
set -eu
B=$(realpath "${1:-build/bin/memslope}")
N=${2:-5}
ROOT=$(pwd)
G=ms$(echo "$B" | md5sum | cut -c1-6)
perf probe -q -d "$G:*" >/dev/null 2>&1 || true
perf probe -q -x "$B" -a "$G:b$G=world_stop_begin" >/dev/null
perf probe -q -x "$B" -a "$G:e$G=world_stop_end" >/dev/null
trap 'perf probe -q -d "$G:*" >/dev/null 2>&1 || true' EXIT
DATA=$(mktemp /tmp/world_stops.XXXXXX)
cd "$ROOT/build/fixtures/python"
export PYTHONPATH="$PWD:$ROOT/build/lib/memslope/python"
for _ in $(seq "$N"); do
    perf record -q -o "$DATA" -e "$G:b$G" -e "$G:e$G" -- "$B" record --quiet -o "$DATA.trace" -- \
        /usr/bin/python3 bench_leakdemo.py --markers 60000 >/dev/null 2>&1
    perf script -i "$DATA" -F time,event 2>/dev/null |
        awk '/:b/ {b = $1 + 0} /:e/ {if (b) {d = ($1 - b) * 1000; s = s sprintf(" %.1f", d); t += d; b = 0}}
             END {printf "total %.1f ms:%s\n", t, s}'
done
rm -f "$DATA" "$DATA.trace" "$DATA.old"
