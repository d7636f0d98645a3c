#!/bin/sh
# Leak classification at exit agrees with memcheck's LEAK SUMMARY: demo_leak
# (100 x 48 bytes definitely lost, 17 blocks / 1152 bytes still reachable)
# and cxx_new_delete (4 blocks / 268 bytes definitely lost); the leaking sites
# carry leaked_bytes and leaked_blocks.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak cxx_new_delete
need_python

leaks() { # JSON CATEGORY FIELD
    jget "$1" "d[\"leaks_at_exit\"][\"$2\"][\"$3\"]"
}
expect_leaks() { # JSON def_bytes def_blocks ind_bytes ind_blocks pos_bytes pos_blocks reach_bytes reach_blocks
    _lj=$1
    shift
    for _cat in definitely_lost indirectly_lost possibly_lost still_reachable; do
        expect_eq "leaks_at_exit.$_cat.bytes" "$1" "$(leaks "$_lj" $_cat bytes)"
        expect_eq "leaks_at_exit.$_cat.blocks" "$2" "$(leaks "$_lj" $_cat blocks)"
        shift 2
    done
}

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record_and_report demo -- "$FIXTURES/demo_leak"
expect_eq "record exit status" 0 "$REC_RC"
# Known in advance.
expect_leaks "$WORK/demo.json" 4800 100 0 0 0 0 1152 17
expect_site "$WORK/demo.json" leaky_site "$LEAK" leaked_bytes=4800 leaked_blocks=100

W=$(fixture_line cxx_new_delete.cpp CXX-LEAK-NEW)
A=$(fixture_line cxx_new_delete.cpp CXX-LEAK-ARRAY)
record_and_report cxx -- "$FIXTURES/cxx_new_delete"
expect_eq "record exit status (cxx)" 0 "$REC_RC"
expect_eq "cxx definitely_lost bytes" 268 "$(leaks "$WORK/cxx.json" definitely_lost bytes)"
expect_eq "cxx definitely_lost blocks" 4 "$(leaks "$WORK/cxx.json" definitely_lost blocks)"
expect_site "$WORK/cxx.json" make_widget "$W" leaked_bytes=168 leaked_blocks=3
expect_site "$WORK/cxx.json" leak_array "$A" leaked_bytes=100 leaked_blocks=1

if command -v valgrind >/dev/null 2>&1; then
    vg_run demo -- "$FIXTURES/demo_leak"
    vg_totals "$(vg_log demo)"
    expect_leaks "$WORK/demo.json" "$VG_DEF_BYTES" "$VG_DEF_BLOCKS" "$VG_IND_BYTES" "$VG_IND_BLOCKS" \
        "$VG_POS_BYTES" "$VG_POS_BLOCKS" "$VG_REACH_BYTES" "$VG_REACH_BLOCKS"
    vg_run cxx -- "$FIXTURES/cxx_new_delete"
    vg_totals "$(vg_log cxx)"
    expect_leaks "$WORK/cxx.json" "$VG_DEF_BYTES" "$VG_DEF_BLOCKS" "$VG_IND_BYTES" "$VG_IND_BLOCKS" \
        "$VG_POS_BYTES" "$VG_POS_BLOCKS" "$VG_REACH_BYTES" "$VG_REACH_BLOCKS"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
