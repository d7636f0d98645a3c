#!/bin/sh
# Stacks written ahead: while the tracer has time to spare, the stacks of a
# running image's new sites go to the trace (once a thousand are new), so
# that its end has less to do (python3 -c pass: 22 ms after the exit, 5 ms
# with them). The image is named first, as at a checkpoint: a memslope
# killed after that, even with checkpoints off, leaves a trace that reads
# and says whose stacks they are, that the figures stop early, and that the
# program ran Python (its report once gave C advice).
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
cd "$WORK" || fail "cannot enter $WORK"

PROCESS=5
STACKS_SHARED=16

# The stacks are written once the image's symbolizer warm-up has ended,
# some 20 ms after its first allocations and whatever the warm-up takes:
# wait_for_section (lib.sh) waits up to 20 s for them.

# A Python start-up makes about ten thousand sites; the program then sleeps.
"$MEMSLOPE" record --quiet --checkpoint off -o killed.trace -- "$PY" -c 'import json, email.message, time; time.sleep(60)' \
    >/dev/null 2>&1 &
tracer=$!
written=$(wait_for_section killed.trace $STACKS_SHARED)
kill -KILL $tracer
wait $tracer 2>/dev/null
expect_eq "stacks written while the program runs, checkpoints off" yes "$written"
kinds=" $(trace_sections killed.trace) "
expect_eq "the image named before its stacks" yes \
    "$(echo "$kinds" | awk -v p=$PROCESS -v s=$STACKS_SHARED '{for (i = 1; i <= NF; i++) {if ($i == p) seen = 1; if ($i == s) {print seen ? "yes" : "no: stacks first"; exit}}}')"
"$MEMSLOPE" report killed.trace --format json >killed.json 2>killed.err
expect_eq "killed: the trace reads" 0 "$?"
expect_match "killed: said to be cut short" "killed.trace is incomplete" killed.err
expect_eq "killed: the process is named" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["exe"].split("/")[-1].startswith("python") else d["processes"][0]["exe"]')"
expect_eq "killed: its figures stop while it ran, its start-up's allocations in them" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["exit"] is None and d["processes"][0]["checkpoint_seconds"] > 0 and d["processes"][0]["totals"]["allocations"] > 1000 else "no"')"
expect_eq "killed: said to run Python (its PYTHON record written with the image's)" yes \
    "$(jget killed.json '"yes" if d["processes"][0]["python"] else "no"')"
"$MEMSLOPE" report killed.trace >killed.txt 2>/dev/null
expect_match "killed: Python's advice on iterations, not C's" 'memslope\.iteration\(\) in the Python code' killed.txt

# A normal end: the program ends once its stacks have been written ahead.
# The image's record ahead of them and its final one; its stacks read
# back, each frame named (none left unresolved by being written before its
# module was known).
rm -f go
"$MEMSLOPE" record --quiet --checkpoint off -o ended.trace -- "$PY" -c '
import json, email.message, os, time
while not os.path.exists("go"):
    time.sleep(0.02)' >/dev/null 2>ended.err &
tracer=$!
written=$(wait_for_section ended.trace $STACKS_SHARED)
touch go
wait $tracer
expect_eq "ended: exit" 0 "$?"
expect_eq "ended: stacks written while the program ran" yes "$written"
kinds=" $(trace_sections ended.trace) "
expect_eq "ended: PROCESS records ahead of the stacks and at the end" yes \
    "$(n=$(echo "$kinds" | tr ' ' '\n' | grep -c "^$PROCESS\$"); [ "$n" -ge 2 ] && echo yes || echo "no: $n")"
report_json ended.trace ended.json >/dev/null
expect_eq "ended: not incomplete" false "$(jget ended.json 'd.get("incomplete", False)')"
expect_eq "ended: its exit" 0 "$(jget ended.json 'd["processes"][0]["exit"]["status"]')"
expect_eq "ended: sites listed" yes "$(jget ended.json '"yes" if d["cases"][0]["sites"] else "no"')"
expect_eq "ended: every frame of the sites listed in a module" 0 \
    "$(jget ended.json 'sum(1 for c in d["cases"] for s in c["sites"] for f in s["frames"] if not f.get("module"))')"
finish
