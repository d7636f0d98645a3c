#!/bin/sh
# fork_child: parent and child allocate known amounts, the child exits 7, the
# parent waits and exits 0. Both process images are in "processes" with their
# own totals and exit; the top level describes the parent, the launched
# command's own process, also when the child allocates more and leaks
# (fork_child busy).
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture fork_child
need_python

PARENT=$(fixture_line fork_child.c FC-PARENT)
record_and_report fork -- "$FIXTURES/fork_child"
J=$WORK/fork.json
expect_eq "record exit status (the parent's)" 0 "$REC_RC"
expect_eq "exit" '{"status": 0}' "$(jget "$J" 'd["exit"]')"
expect_eq "number of processes" 2 "$(jget "$J" 'len(d["processes"])')"
# Top level: the parent.
expect_totals "$J" d 20 18 10000
expect_site "$J" parent_work "$PARENT" allocations=20 allocated_bytes=10000 live_bytes=1000

CHILD='[p for p in d["processes"] if p.get("exit") == {"status": 7}][0]'
PAR='[p for p in d["processes"] if p.get("exit") == {"status": 0}][0]'
expect_totals "$J" "$CHILD" 10 5 30000
expect_totals "$J" "$PAR" 20 18 10000
expect_ne "child pid differs from parent pid" "$(jget "$J" "$PAR[\"pid\"]")" "$(jget "$J" "$CHILD[\"pid\"]")"
expect_eq "child exe" true "$(jget "$J" "$CHILD[\"exe\"].endswith(\"/fork_child\")")"

if command -v valgrind >/dev/null 2>&1; then
    vg_run fork -- "$FIXTURES/fork_child"
    # One log per process; the parent's is the one that waited (20 allocs).
    for l in "$WORK"/vg.fork.*.log; do
        vg_totals "$l"
        if [ "$VG_ALLOCS" = 20 ]; then
            expect_totals "$J" "$PAR" "$VG_ALLOCS" "$VG_FREES" "$VG_BYTES"
        else
            expect_totals "$J" "$CHILD" "$VG_ALLOCS" "$VG_FREES" "$VG_BYTES"
        fi
    done
fi

# busy: the child allocates more than ten times as often as its parent (250
# against 20) and leaks 480 bytes; the headline is still the parent's, and
# its exit is record's.
record_and_report busy -- "$FIXTURES/fork_child" busy
J=$WORK/busy.json
expect_eq "busy: record exit status (the parent's)" 0 "$REC_RC"
expect_eq "busy: exit (the parent's, not the child's 7)" '{"status": 0}' "$(jget "$J" 'd["exit"]')"
expect_totals "$J" d 20 18 10000
expect_eq "busy: the primary process is the parent" "$(jget "$J" "$PAR[\"pid\"]")" \
    "$(jget "$J" '[p["pid"] for p in d["processes"] if p["primary"]][0]')"
expect_totals "$J" "$CHILD" 250 240 12000
expect_site "$J" parent_work "$PARENT" allocations=20 allocated_bytes=10000 live_bytes=1000
expect_eq "busy: the child's site is not in the headline" none \
    "$(site_get "$J" allocations drop_blocks "$(fixture_line fork_child.c FC-BUSY-CHILD)" 2>/dev/null)"
expect_eq "busy: the parent leaked nothing" "0 0" \
    "$(jget "$J" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]') $(jget "$J" 'd["leaks_at_exit"]["definitely_lost"]["blocks"]')"

# --no-follow: only the parent is traced; its figures are unchanged.
record_and_report nofollow --no-follow -- "$FIXTURES/fork_child"
expect_eq "--no-follow: record exit status" 0 "$REC_RC"
expect_totals "$WORK/nofollow.json" d 20 18 10000
expect_eq "--no-follow: processes" 1 "$(jget "$WORK/nofollow.json" 'len(d["processes"])')"
finish
