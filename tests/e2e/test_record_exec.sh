#!/bin/sh
# fork_exec: the child execs demo_leak. The exec'd image is in "processes"
# with its totals and exit status; the top level describes the parent, the
# launched command's own process, though the child allocated far more.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture fork_exec demo_leak
need_python

LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
record_and_report exec -- "$FIXTURES/fork_exec"
J=$WORK/exec.json
expect_eq "record exit status" 0 "$REC_RC"
expect_totals "$J" d 5 5 3500
expect_eq "the primary process is fork_exec's first image" true \
    "$(jget "$J" '[p["exe"].endswith("/fork_exec") and not p["execed"] and p["totals"]["allocations"] == 5 for p in d["processes"] if p["primary"]] == [True]')"
expect_eq "an image of demo_leak is in processes" true \
    "$(jget "$J" 'any(p["exe"].endswith("/demo_leak") for p in d["processes"])')"
DL='[p for p in d["processes"] if p["exe"].endswith("/demo_leak")][0]'
FE='[p for p in d["processes"] if p["exe"].endswith("/fork_exec") and p["totals"]["allocations"] > 0][0]'
expect_totals "$J" "$DL" 217 100 31552
expect_eq "demo_leak image exit" '{"status": 0}' "$(jget "$J" "$DL[\"exit\"]")"
expect_totals "$J" "$FE" 5 5 3500
expect_eq "no image other than the parent's and demo_leak's allocated" 0 \
    "$(jget "$J" 'sum(p["totals"]["allocations"] for p in d["processes"] if not p["exe"].endswith("/demo_leak")) - 5')"

if command -v valgrind >/dev/null 2>&1; then
    vg_run exec --trace-children=yes -- "$FIXTURES/fork_exec"
    vg_totals "$(vg_log exec '.*/demo_leak')"
    expect_totals "$J" "$DL" "$VG_ALLOCS" "$VG_FREES" "$VG_BYTES"
    vg_totals "$(vg_log exec '.*/fork_exec')"
    expect_totals "$J" "$FE" "$VG_ALLOCS" "$VG_FREES" "$VG_BYTES"
fi

# An exec chain through a shell (as when `python3` is a wrapper script): the
# top level is the program the shell exec'd.
record_and_report chain -- /bin/sh -c 'exec "$0"' "$FIXTURES/demo_leak"
expect_eq "sh -c 'exec demo_leak': record exit status" 0 "$REC_RC"
expect_totals "$WORK/chain.json" d 217 100 31552
expect_site "$WORK/chain.json" leaky_site "$LEAK" allocations=100 allocated_bytes=4800 live_bytes=4800
expect_eq "sh -c 'exec demo_leak': an image of demo_leak is in processes" true \
    "$(jget "$WORK/chain.json" 'any(p["exe"].endswith("/demo_leak") for p in d["processes"])')"
finish
