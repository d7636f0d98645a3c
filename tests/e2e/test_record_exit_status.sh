#!/bin/sh
# record exits with the target's exit status (42, 0, 3, 255); the report's
# "exit" agrees; the default trace name is memslope.<command>.<pid>.trace.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture exit_status
need_python

ALLOC=$(fixture_line exit_status.c EXS-ALLOC)
record_and_report s42 -- "$FIXTURES/exit_status"
expect_eq "record exit status" 42 "$REC_RC"
expect_eq "exit" '{"status": 42}' "$(jget "$WORK/s42.json" 'd["exit"]')"
expect_totals "$WORK/s42.json" d 3 1 1260
expect_site "$WORK/s42.json" main "$ALLOC" allocations=3 allocated_bytes=1260 live_bytes=840
expect_eq "command" "[\"$FIXTURES/exit_status\"]" "$(jget "$WORK/s42.json" 'd["command"]')"

for s in 0 3 255; do
    record "$WORK/s$s.trace" -- "$FIXTURES/exit_status" $s
    expect_eq "record exit status (target exits $s)" $s "$REC_RC"
done
record_and_report s3 -- "$FIXTURES/exit_status" 3
expect_eq "exit (3)" '{"status": 3}' "$(jget "$WORK/s3.json" 'd["exit"]')"
expect_eq "command (with argument)" "[\"$FIXTURES/exit_status\", \"3\"]" "$(jget "$WORK/s3.json" 'd["command"]')"

# Default output name, in the current folder.
mkdir -p "$WORK/default"
(cd "$WORK/default" && timeout 60 "$MEMSLOPE" record -- "$FIXTURES/exit_status" 5 >/dev/null 2>&1)
expect_eq "record exit status (default output)" 5 "$?"
expect_eq "default trace name memslope.exit_status.<pid>.trace" 1 \
    "$(ls "$WORK/default" | grep -cE '^memslope\.exit_status\.[0-9]+\.trace$')"
finish
