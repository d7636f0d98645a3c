#!/bin/sh
# A Python process that forks (fixtures/python/fork_child.py): the child's
# region starts empty, but the sites it inherits carry the parent's Python
# frame words and its own code caches knew the parent's table. Its trace
# must name every Python frame (the function both ran, the one only the
# child ran, and main above them) and say it ran Python.
. "$(dirname "$0")/lib.sh"
need_memslope
PY=/usr/bin/python3
[ -x "$PY" ] || skip "no system python3"
record "$WORK/f.trace" -- "$PY" "$SRC_FIXTURES/python/fork_child.py"
expect_eq "record exit" 0 "$REC_RC"
report_json "$WORK/f.trace" "$WORK/f.json"
expect_eq "two processes, both ran Python with frames read" "2 true" \
    "$(jget "$WORK/f.json" "'%d %s' % (len(d['processes']), str(all(p['python'] and p['python']['frames'] for p in d['processes'])).lower())")"
trace_stacks "$WORK/f.trace" >"$WORK/stacks.txt"
# process ids count from the launched command (0); the fork child is 1
expect_eq "the trace's processes" "0 1" "$(cut -f1 "$WORK/stacks.txt" | sort -u | tr '\n' ' ' | sed 's/ $//')"
child=1
grep "^$child	" "$WORK/stacks.txt" >"$WORK/child.txt"
expect_eq "the child names every Python frame" 0 "$(grep -c 'unknown Python function' "$WORK/child.txt")"
expect_eq "the child's own function, below main" 1 \
    "$(grep -c '?:only_in_child;.*?:main;' "$WORK/child.txt" | awk '{print ($1 > 0)}')"
expect_eq "the function both ran, in the child" 1 \
    "$(grep -c '?:in_both;.*?:main;' "$WORK/child.txt" | awk '{print ($1 > 0)}')"
finish
