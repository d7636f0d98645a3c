#!/bin/sh
# A trace that survives memslope's death (issue 19): while a process image
# runs, memslope writes checkpoints of it (--checkpoint, the first after 5 s
# by default, the gaps doubling), so a memslope killed with SIGKILL leaves
# what it had measured up to its last checkpoint: the case, its iterations
# and growth, the site by its symbols. A recording that ends normally holds
# the same report whether or not checkpoints were written.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture checkpoint_run
need_python
cd "$WORK" || fail "cannot enter $WORK"
LEAK=$(fixture_line checkpoint_run.c CP-LEAK)

# memslope killed 2 s into a 10 s run, checkpoints from 200 ms on.
"$MEMSLOPE" record --quiet --checkpoint 200ms -o killed.trace -- "$FIXTURES/checkpoint_run" 1000 >/dev/null 2>&1 &
tracer=$!
sleep 2
kill -KILL $tracer
wait $tracer 2>/dev/null
"$MEMSLOPE" report killed.trace --format json >killed.json 2>killed.err
expect_eq "killed: the trace reads" 0 "$?"
expect_match "killed: said to be cut short" "killed.trace is incomplete" killed.err
expect_eq "killed: incomplete in JSON" true "$(jget killed.json 'd["incomplete"]')"
iterations=$(jget killed.json 'd["cases"][0]["iterations"]')
expect_eq "killed: the case" steady "$(jget killed.json 'd["cases"][0]["name"]')"
expect_eq "killed: the iterations of the first checkpoints (at least 30 of the ~200 run)" yes \
    "$([ "$iterations" -ge 30 ] && [ "$iterations" -le 200 ] && echo yes || echo "no: $iterations")"
# One allocation per iteration, the marker first: a checkpoint taken between
# an iteration's marker and its allocation (the marker wakes the tracer, the
# allocation comes microseconds later) counts the iteration without it.
allocations=$(jget killed.json 'd["totals"]["allocations"]')
expect_eq "killed: one allocation per iteration begun (the last may not have made it yet)" yes \
    "$([ "$allocations" -le "$iterations" ] && [ "$allocations" -ge $((iterations - 1)) ] && echo yes ||
        echo "no: $allocations allocations, $iterations iterations")"
expect_eq "killed: growth" 48 "$(jget killed.json 'd["cases"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "killed: the growing site by name and line" "leak_one:$LEAK" \
    "$(jget killed.json '"%s:%s" % (d["cases"][0]["sites"][0]["frames"][0]["function"], d["cases"][0]["sites"][0]["frames"][0]["line"])')"
expect_eq "killed: the process was still running at the checkpoint" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["exit"] is None and d["processes"][0]["checkpoint_seconds"] > 0.2 else "no"')"
"$MEMSLOPE" report killed.trace >killed.txt 2>/dev/null
expect_match "killed: the text says so" "still running at memslope's last checkpoint" killed.txt
"$MEMSLOPE" gate killed.trace --max-growth 1G >gate.out 2>&1
expect_eq "killed: gate refuses the partial figures" 2 "$?"

# Ending normally: the same report with checkpoints and without (all but
# times and pids), also when snapshots are thinned meanwhile.
for run in with without; do
    checkpoint=200ms
    [ $run = without ] && checkpoint=off
    record "$run.trace" --checkpoint "$checkpoint" --snapshots 20 -- "$FIXTURES/checkpoint_run" 150
    expect_eq "$run checkpoints: exit" 0 "$REC_RC"
    report_json "$run.trace" "$run.json" >/dev/null
    # Every figure but times and pids, and the iteration snapshots' count apart.
    "$PY" - "$run.json" >"$run.figures" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
def strip(x):
    if isinstance(x, dict):
        return {k: strip(v) for k, v in x.items() if k not in ("pid", "address", "time_ms", "begin_ms", "end_ms", "timeline",
                                                            "start_unix_ns", "duration_ms", "snapshots", "warnings")}
    if isinstance(x, list):
        return [strip(v) for v in x]
    return x
print(json.dumps(strip(d), sort_keys=True, indent=1))
PY
done
if cmp -s with.figures without.figures; then
    log "ok       a normal end: the same figures with checkpoints and without"
else
    diff without.figures with.figures | head -n 30
    expect_eq "a normal end: the same figures with checkpoints and without" same different
fi
sections=$(trace_sections with.trace | tr ' ' '\n' | grep -c '^5$') # PROCESS sections
expect_eq "with checkpoints: PROCESS written at checkpoints and at the end" yes \
    "$([ "$sections" -ge 3 ] && echo yes || echo "no: $sections")"
finish
