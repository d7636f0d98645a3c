#!/bin/sh
# unseen_free: a block allocated behind the recording's back (glibc's
# __libc_malloc) is freed, and the very next malloc gets its address back.
# That malloc's block is leaked and must be reported: the free it follows
# in the same thread is not its own (tracer/recorder.c, struct
# pending_free). Cross-checked with memcheck, which sees both blocks.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture unseen_free
need_python

LEAK=$(fixture_line unseen_free.c UNSEEN-LEAK)
record_and_report unseen -- "$FIXTURES/unseen_free"
J=$WORK/unseen.json
expect_eq "record exit status" 0 "$REC_RC"
expect_eq "the address came back (glibc's thread cache)" same "$(cat "$WORK/rec.out")"
expect_totals "$J" d 11 11 440
expect_eq "definitely lost bytes" 40 "$(jget "$J" 'd["leaks_at_exit"]["definitely_lost"]["bytes"]')"
expect_eq "definitely lost blocks" 1 "$(jget "$J" 'd["leaks_at_exit"]["definitely_lost"]["blocks"]')"
expect_site "$J" leak "$LEAK" leaked_bytes=40 leaked_blocks=1

if command -v valgrind >/dev/null 2>&1; then
    vg_run unseen -- "$FIXTURES/unseen_free"
    expect_match "memcheck: the same block definitely lost" "definitely lost: 40 bytes in 1 blocks" \
        "$(vg_log unseen '.*unseen_free')"
fi
finish
