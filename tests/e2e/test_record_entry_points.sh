#!/bin/sh
# Every allocator entry point (fixtures/entry_points.c): one site each, with
# exact allocations, bytes and live bytes; realloc counts as one allocation
# plus one free of the old block, realloc(p, 0) as a free, free(NULL) not at
# all. The figures known in advance are checked against memcheck on the
# variant without pvalloc (valgrind 3.19 aborts on pvalloc).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture entry_points
need_python

L() { fixture_line entry_points.c "$1"; }
PAGE=$(getconf PAGESIZE)

record_and_report ep -- "$FIXTURES/entry_points"
J=$WORK/ep.json
expect_eq "record exit status" 0 "$REC_RC"

expect_site "$J" ep_malloc "$(L EP-MALLOC)" allocations=1 allocated_bytes=1001 live_bytes=1001
expect_site "$J" ep_calloc "$(L EP-CALLOC)" allocations=1 allocated_bytes=1030 live_bytes=1030
expect_site "$J" ep_realloc_grow "$(L EP-GROW-MALLOC)" allocations=1 allocated_bytes=1100 live_bytes=0
expect_site "$J" ep_realloc_grow "$(L EP-GROW-REALLOC)" allocations=1 allocated_bytes=2200 live_bytes=2200
expect_site "$J" ep_realloc_null "$(L EP-REALLOC-NULL)" allocations=1 allocated_bytes=1300 live_bytes=0
expect_site "$J" ep_realloc_zero "$(L EP-ZERO-MALLOC)" allocations=1 allocated_bytes=1400 live_bytes=0
# realloc(p, 0) allocates nothing on glibc: no site, or one with no allocation.
Z=$(site_get "$J" allocations ep_realloc_zero "$(L EP-ZERO-REALLOC)" 2>/dev/null)
expect_in "site ep_realloc_zero:$(L EP-ZERO-REALLOC) allocations (realloc(p,0) is a free)" "none 0" "$Z"
expect_site "$J" ep_reallocarray "$(L EP-REALLOCARRAY)" allocations=1 allocated_bytes=1500 live_bytes=1500
expect_site "$J" ep_posix_memalign "$(L EP-POSIX-MEMALIGN)" allocations=1 allocated_bytes=1600 live_bytes=1600
expect_site "$J" ep_aligned_alloc "$(L EP-ALIGNED-ALLOC)" allocations=1 allocated_bytes=1728 live_bytes=1728
expect_site "$J" ep_memalign "$(L EP-MEMALIGN)" allocations=1 allocated_bytes=1800 live_bytes=1800
expect_site "$J" ep_valloc "$(L EP-VALLOC)" allocations=1 allocated_bytes=1900 live_bytes=0
expect_site "$J" ep_malloc_zero "$(L EP-MALLOC-ZERO)" allocations=1 allocated_bytes=0 live_bytes=0
expect_eq "site ep_free_null (free(NULL) is no event)" none "$(site_get "$J" allocations ep_free_null "$(L EP-FREE-NULL)" 2>/dev/null)"

# pvalloc(2000): memcheck (3.22 and later) counts the page-rounded size; the
# size the program passed is also defensible. Either way the totals must agree.
PV=$(site_get "$J" allocated_bytes ep_pvalloc "$(L EP-PVALLOC)")
expect_in "site ep_pvalloc allocated_bytes (page-rounded, or as asked)" "$PAGE 2000" "$PV"
expect_site "$J" ep_pvalloc "$(L EP-PVALLOC)" allocations=1 "live_bytes=$PV"
case "$PV" in ''|*[!0-9]*) PV=$PAGE ;; esac

# Totals known in advance (the program prints nothing: libc allocates nothing).
expect_totals "$J" d 13 5 $((16559 + PV))
expect_eq "totals.peak_bytes (= live at exit)" $((10859 + PV)) "$(jget "$J" 'd["totals"]["peak_bytes"]')"
expect_eq "sum of live_bytes over sites" $((10859 + PV)) "$(jget "$J" 'sum(s["live_bytes"] for s in d["cases"][0]["sites"])')"

# The advance figures hold under memcheck (variant without pvalloc), and
# memslope agrees on that variant too.
if command -v valgrind >/dev/null 2>&1; then
    vg_run ep -- "$FIXTURES/entry_points" no-pvalloc
    vg_totals "$(vg_log ep)"
    expect_eq "memcheck on entry_points no-pvalloc (allocs frees bytes)" "12 5 16559" "$VG_ALLOCS $VG_FREES $VG_BYTES"
    expect_eq "memcheck live at exit (still reachable)" "10859 7" "$VG_REACH_BYTES $VG_REACH_BLOCKS"
    record_and_report ep2 -- "$FIXTURES/entry_points" no-pvalloc
    expect_vg_totals "$WORK/ep2.json"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
