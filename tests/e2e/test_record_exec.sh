#!/bin/sh
# fork_exec: the child execs demo_leak. The exec'd image is in "processes"
# with its totals and exit status; the top level describes the parent, the
# launched command's own process, though the child allocated far more.
# Its check without address randomisation caught a race in the tracer (maps
# read after an exec not yet handled), seen only when tests ran beside it:
# docs/internals.md, "The test harness".
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

# Without address space randomisation the exec'd program is mapped where the
# forked child's fork_exec was: the child's image keeps the mappings read
# while it ran (its inherited sites are fork_exec's main), never the new
# program's (which named them handle_request, in demo_leak).
if setarch -R true 2>/dev/null; then
    log "\$ setarch -R memslope record -o $WORK/norandom.trace -- $FIXTURES/fork_exec"
    setarch -R "$MEMSLOPE" record -o "$WORK/norandom.trace" -- "$FIXTURES/fork_exec" >/dev/null 2>&1
    expect_eq "setarch -R: record exit status" 0 "$?"
    trace_stacks "$WORK/norandom.trace" >"$WORK/norandom.stacks"
    expect_eq "setarch -R: stacks of the fork_exec images" "fork_exec:main" \
        "$(awk -F '\t' '$2 == "fork_exec" {split($3, f, ";"); print f[1]}' "$WORK/norandom.stacks" | sort -u | tr '\n' ' ' | sed 's/ $//')"
    expect_eq "setarch -R: no frame of a fork_exec image in demo_leak" 0 \
        "$(awk -F '\t' '$2 == "fork_exec" && $3 ~ /demo_leak:/' "$WORK/norandom.stacks" | wc -l)"
else
    log "setarch -R is not permitted here: the check without randomisation is skipped"
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
