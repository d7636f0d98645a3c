#!/bin/sh
# exit_paths: return from main, exit(), _exit(), exit() and _exit() from a
# non-main thread. The allocation made just before the exit (and the one an
# atexit handler makes during it) are counted; record exits with the status.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture exit_paths
need_python

F=exit_paths.c
COMMON=$(fixture_line $F EXP-COMMON)
ATEXIT=$(fixture_line $F EXP-ATEXIT)
have_vg=0
command -v valgrind >/dev/null 2>&1 && have_vg=1

# variant status function marker size atexit? (advance totals: allocs frees bytes, or "-" for "memcheck's")
while read -r variant status func marker size atexit allocs frees bytes <&3; do
    name=v_$(echo "$variant" | tr -c 'a-z\n' '_')
    record_and_report "$name" -- "$FIXTURES/exit_paths" "$variant"
    J=$WORK/$name.json
    expect_eq "$variant: record exit status" "$status" "$REC_RC"
    expect_eq "$variant: exit" "{\"status\": $status}" "$(jget "$J" 'd["exit"]')"
    expect_site "$J" main "$COMMON" allocations=10 allocated_bytes=1000 live_bytes=500
    expect_site "$J" "$func" "$(fixture_line $F "$marker")" allocations=1 "allocated_bytes=$size" "live_bytes=$size"
    if [ "$atexit" = yes ]; then
        expect_site "$J" at_exit_handler "$ATEXIT" allocations=1 allocated_bytes=706 live_bytes=706
    else
        expect_eq "$variant: no atexit allocation" none "$(site_get "$J" allocations at_exit_handler "$ATEXIT" 2>/dev/null)"
    fi
    if [ "$allocs" != - ]; then
        expect_totals "$J" d "$allocs" "$frees" "$bytes"
    fi
    if [ $have_vg = 1 ]; then
        vg_run "$name" -- "$FIXTURES/exit_paths" "$variant"
        vg_totals "$(vg_log "$name")"
        expect_vg_totals "$J"
    fi
done 3<<'TABLE'
return 10 main EXP-RETURN 701 yes 12 5 2407
exit 11 main EXP-EXIT 702 yes 12 5 2408
_exit 12 main EXP-_EXIT 703 no 11 5 1703
thread-exit 13 thread_exit EXP-THREAD-EXIT 704 yes - - -
thread-_exit 14 thread_exit_group EXP-THREAD-_EXIT 705 no - - -
TABLE
finish
