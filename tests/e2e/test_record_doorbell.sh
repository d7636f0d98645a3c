#!/bin/sh
# The tracer's doorbell (common/shm_layout.h, SHM_TRACER_DOORBELL): the
# drain loop sleeps while the rings are quiet, and what must not wait for
# the end of that sleep wakes it. Here the sleep is an hour
# (MEMSLOPE_IDLE_WAIT_MS), so a recording that ends within the timeout was
# woken by its stops and the doorbell alone (checkpoints off: the sleep
# ends no later than the next one). fixtures/quiet_then_burst.c
# sleeps, then fills its ring six times over: its thread must ring when
# the ring is full (before, it waited out the sleep); with "fork", a child
# made after the quiet spell does it (a thread the loop has not seen
# rings: the drain after the doorbell looks at every ring); without ptrace
# the exit check comes by the socket, which rings through O_ASYNC; with
# "drop" the program becomes another user, the kernel refuses its
# doorbell, and once the tracer has seen that (at the end of a sleep made
# 4 s here) it sleeps 2 ms at most: the program's 20 ring fills, each
# after a quiet spell, would take 80 s otherwise, past the recording's
# timeout. Then Python's symbolizer warm-up, whose end lets the loop write
# stacks ahead.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
need_fixture quiet_then_burst
export MEMSLOPE_IDLE_WAIT_MS=3600000
LINE=$(fixture_line quiet_then_burst.c BURST-LEAK)

# check_burst NAME JSON PROCESS [BLOCKS]: the fixture's exact figures in
# PROCESS (a Python expression over the report's d), for a burst of BLOCKS
# (100,000 unless said).
check_burst() {
    _p=$3 _n=${4:-100000}
    expect_eq "$1: allocations, frees, bytes allocated" "$((_n + 5)) $_n $((_n * 64 + 500))" \
        "$(jget "$2" "' '.join(str(${_p}['totals'][k]) for k in ('allocations', 'frees', 'allocated_bytes'))")"
    expect_eq "$1: definitely lost (blocks, bytes), live at exit (bytes)" "5 500 500" \
        "$(jget "$2" "' '.join(str(x) for x in [${_p}['leaks_at_exit']['definitely_lost']['blocks'], ${_p}['leaks_at_exit']['definitely_lost']['bytes'], ${_p}['live_at_exit']['bytes']])")"
}
PRIMARY='[p for p in d["processes"] if p["primary"]][0]'
CHILD='[p for p in d["processes"] if not p["primary"]][0]'

record "$WORK/burst.trace" --checkpoint off -- "$FIXTURES/quiet_then_burst"
expect_eq "burst: record exit" 0 "$REC_RC"
report_json "$WORK/burst.trace" "$WORK/burst.json"
check_burst burst "$WORK/burst.json" "$PRIMARY"
expect_site "$WORK/burst.json" burst_leak "$LINE" allocations=5 live_bytes=500

record "$WORK/fork.trace" --checkpoint off -- "$FIXTURES/quiet_then_burst" fork
expect_eq "fork: record exit" 0 "$REC_RC"
report_json "$WORK/fork.trace" "$WORK/fork.json"
expect_eq "fork: two process images" 2 "$(jget "$WORK/fork.json" 'len(d["processes"])')"
check_burst "fork: the child" "$WORK/fork.json" "$CHILD"
expect_eq "fork: the parent allocated nothing" 0 "$(jget "$WORK/fork.json" "${PRIMARY}['totals']['allocations']")"

record_no_ptrace "$WORK/noptrace.trace" --checkpoint off -- "$FIXTURES/quiet_then_burst"
expect_eq "no ptrace: record exit" 0 "$REC_RC"
report_json "$WORK/noptrace.trace" "$WORK/noptrace.json"
check_burst "no ptrace" "$WORK/noptrace.json" "$PRIMARY"

if [ "$(id -u)" -eq 0 ]; then
    MEMSLOPE_IDLE_WAIT_MS=4000
    record "$WORK/drop.trace" --checkpoint off -- "$FIXTURES/quiet_then_burst" drop
    MEMSLOPE_IDLE_WAIT_MS=3600000
    expect_eq "drop: record exit" 0 "$REC_RC"
    report_json "$WORK/drop.trace" "$WORK/drop.json"
    check_burst drop "$WORK/drop.json" "$PRIMARY" 400000
else
    log "skipped: the program that becomes another user (needs root)"
fi

# The warm-up's end: stacks written ahead while Python sleeps (as in
# test_record_stacks_ahead.sh, which sleeps 10 ms at a time).
"$MEMSLOPE" record --quiet --checkpoint off -o "$WORK/py.trace" -- "$PY" -c 'import json, email.message, time; time.sleep(60)' \
    >/dev/null 2>&1 &
tracer=$!
written=$(wait_for_section "$WORK/py.trace" 16) # STACKS_SHARED (docs/trace-format.md)
kill -KILL $tracer
wait $tracer 2>/dev/null
expect_eq "python: stacks written ahead while it sleeps" yes "$written"
finish
