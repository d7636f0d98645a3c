#!/bin/sh
# startup_phases.sh - where `memslope record -- python3 -c pass` spends its
# time, from the scheduler's tracepoints (perf; needs root): memslope's
# start to the program's exec, the program's run, and the program's exit
# to memslope's, medians of RUNS runs (default 15), in ms.
#
#   bench/startup_phases.sh [MEMSLOPE] [RUNS]
#
# The symbol cache is the caller's ($XDG_CACHE_HOME): warm it with one run
# first, and give each build its own when comparing builds.
set -eu
M=$(realpath "${1:-build/bin/memslope}")
N=${2:-15}
DATA=$(mktemp /tmp/startup_phases.XXXXXX)
trap 'rm -f "$DATA" "$DATA.trace" "$DATA.old" "$DATA.runs"' EXIT
for _ in $(seq "$N"); do
    perf record -q -o "$DATA" -e sched:sched_process_exec,sched:sched_process_exit -- \
        "$M" record --quiet -o "$DATA.trace" -- /usr/bin/python3 -c pass 2>/dev/null
    perf script -i "$DATA" -F comm,tid,time,event 2>/dev/null | awk '
        /sched_process_exec/ && $1 == "memslope" {start = $3 + 0; tracer = $2}
        /sched_process_exec/ && $1 == "python3" {exec = $3 + 0}
        /sched_process_exit/ && $1 == "python3" {gone = $3 + 0}
        /sched_process_exit/ && $1 == "memslope" && $2 == tracer {end = $3 + 0}
        END {printf "%.2f %.2f %.2f %.2f\n", (exec - start) * 1000, (gone - exec) * 1000, (end - gone) * 1000, (end - start) * 1000}'
done >"$DATA.runs"
# medians (mawk, Debian's awk, has no asort): each column sorted on its own
median() { cut -d' ' -f"$1" "$DATA.runs" | sort -n | awk '{v[NR] = $1} END {print v[int((NR + 1) / 2)]}'; }
printf 'to exec %s  run %s  after exit %s  total %s ms (medians of %s)\n' "$(median 1)" "$(median 2)" "$(median 3)" \
    "$(median 4)" "$(wc -l <"$DATA.runs")"
