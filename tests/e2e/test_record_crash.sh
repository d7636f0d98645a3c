#!/bin/sh
# crash_segv: SIGSEGV after known allocations. record exits 139 (128 + 11),
# the trace is readable, the exit is {"signal": 11}, the blocks live at the
# crash are reported, and the totals equal memcheck's. Also with a SIGSEGV
# handler that allocates before the fault kills the process.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture crash_segv
need_python

record_and_report segv -- "$FIXTURES/crash_segv"
J=$WORK/segv.json
expect_eq "record exit status" 139 "$REC_RC"
expect_eq "exit" '{"signal": 11}' "$(jget "$J" 'd["exit"]')"
expect_totals "$J" d 4 1 1600
expect_site "$J" fill "$(fixture_line crash_segv.c SEGV-ALLOC)" allocations=3 allocated_bytes=1536 live_bytes=1536
expect_site "$J" fill "$(fixture_line crash_segv.c SEGV-TEMP)" allocations=1 allocated_bytes=64 live_bytes=0
expect_eq "no core file left in the current folder" "" "$(ls core* 2>/dev/null)"

if command -v valgrind >/dev/null 2>&1; then
    vg_run segv -- "$FIXTURES/crash_segv"
    vg_totals "$(vg_log segv)"
    expect_vg_totals "$J"
    expect_eq "leaks_at_exit.still_reachable = memcheck's (the blocks in the global array)" \
        "{\"blocks\": $VG_REACH_BLOCKS, \"bytes\": $VG_REACH_BYTES}" "$(jget "$J" 'd["leaks_at_exit"]["still_reachable"]')"
    expect_eq "leaks_at_exit.definitely_lost = memcheck's" \
        "{\"blocks\": $VG_DEF_BLOCKS, \"bytes\": $VG_DEF_BYTES}" "$(jget "$J" 'd["leaks_at_exit"]["definitely_lost"]')"
    expect_eq "blocks live at the crash (memcheck: in use at exit)" "$VG_REACH_BYTES" \
        "$(jget "$J" 'sum(s["live_bytes"] for s in d["cases"][0]["sites"])')"
fi

# A SIGSEGV handler that allocates, then lets the fault happen again: the
# first SIGSEGV is not fatal, the handler's block counts, the second kills.
record_and_report handler -- "$FIXTURES/crash_segv" handler
J=$WORK/handler.json
expect_eq "handler: record exit status" 139 "$REC_RC"
expect_eq "handler: exit" '{"signal": 11}' "$(jget "$J" 'd["exit"]')"
expect_totals "$J" d 5 1 1699
expect_site "$J" on_segv "$(fixture_line crash_segv.c SEGV-HANDLER)" allocations=1 allocated_bytes=99 live_bytes=99
expect_site "$J" fill "$(fixture_line crash_segv.c SEGV-ALLOC)" allocations=3 allocated_bytes=1536 live_bytes=1536
expect_eq "handler: leaks_at_exit.still_reachable (memcheck: 1635 bytes in 4 blocks)" \
    '{"blocks": 4, "bytes": 1635}' "$(jget "$J" 'd["leaks_at_exit"]["still_reachable"]')"
finish
