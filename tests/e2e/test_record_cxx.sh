#!/bin/sh
# C++: new/delete, new[]/delete[], std::vector growth, two leaks. The leaking
# sites' innermost shown frame is the caller (make_widget, leak_array), never
# operator new or malloc. Totals equal memcheck's (libstdc++ allocates its
# exception pool at start-up; memcheck counts it, so must memslope).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture cxx_new_delete
need_python

F=cxx_new_delete.cpp
record_and_report cxx -- "$FIXTURES/cxx_new_delete"
J=$WORK/cxx.json
expect_eq "record exit status" 0 "$REC_RC"
expect_site "$J" make_widget "$(fixture_line $F CXX-LEAK-NEW)" allocations=3 allocated_bytes=168 live_bytes=168
expect_site "$J" leak_array "$(fixture_line $F CXX-LEAK-ARRAY)" allocations=1 allocated_bytes=100 live_bytes=100
expect_site "$J" scratch "$(fixture_line $F CXX-NEW-SCALAR)" allocations=3 allocated_bytes=12 live_bytes=0
expect_site "$J" scratch "$(fixture_line $F CXX-NEW-ARRAY)" allocations=3 allocated_bytes=900 live_bytes=0
# The vector's allocations happen inside libstdc++'s inline templates: find
# them by grow_vector anywhere in the stack.
expect_eq "sites under grow_vector: allocations" 11 "$(site_any_get "$J" allocations grow_vector)"
expect_eq "sites under grow_vector: allocated_bytes" 8188 "$(site_any_get "$J" allocated_bytes grow_vector 2>/dev/null)"
expect_eq "sites under grow_vector: live_bytes" 0 "$(site_any_get "$J" live_bytes grow_vector 2>/dev/null)"
expect_eq "no site shows operator new/new[]/malloc innermost" "[]" \
    "$(jget "$J" 'sorted({s["frames"][0]["function"] for s in d["cases"][0]["sites"] if s["frames"] and (s["frames"][0]["function"] in ("malloc", "_Znwm", "_Znam") or s["frames"][0]["function"].startswith("operator new"))})')"

if command -v valgrind >/dev/null 2>&1; then
    vg_run cxx -- "$FIXTURES/cxx_new_delete"
    vg_totals "$(vg_log cxx)"
    expect_vg_totals "$J"
else
    log "valgrind not installed: cross-check skipped"
fi
finish
