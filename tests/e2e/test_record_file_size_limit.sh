#!/bin/sh
# RLIMIT_FSIZE (ulimit -f) below the size of the shim's memfds: their
# ftruncate raised SIGXFSZ, which ended the program ("killed by signal 25")
# the moment the shim made its region. Now a soft limit is raised for the
# ftruncate and put back (preload/memfd_file.h); under a hard limit the
# image runs unrecorded, unharmed. The limit is set in the recorded image
# before it execs demo_leak, so the new image makes its region under it.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak

# soft limit 1 GB (in 512-byte blocks), hard unlimited
record "$WORK/soft.trace" -- sh -c 'ulimit -S -f 2000000 && exec "$0"' "$FIXTURES/demo_leak"
expect_eq "soft limit: exit status" 0 "$REC_RC"
report_json "$WORK/soft.trace" "$WORK/soft.json"
expect_eq "soft limit: demo_leak's leak recorded" "4800/100" \
    "$(jget "$WORK/soft.json" '"%d/%d" % (d["leaks_at_exit"]["definitely_lost"]["bytes"], d["leaks_at_exit"]["definitely_lost"]["blocks"])')"

# soft and hard limits 1 GB: the region cannot be made; the program is not killed
record "$WORK/hard.trace" -- sh -c 'ulimit -f 2000000 && exec "$0"' "$FIXTURES/demo_leak"
expect_eq "hard limit: exit status (demo_leak ran to its end)" 0 "$REC_RC"
finish
