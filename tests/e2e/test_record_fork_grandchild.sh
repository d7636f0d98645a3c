#!/bin/sh
# fork_grandchild: a fork child that frees, allocates and forks at once.
# Every grandchild's heap is its parent's at the fork: its leak check runs
# (no "heap blocks overlap") and finds exactly the 228 bytes it dropped, at
# grandchild (fork_grandchild.c FG-LEAK); every child's check finds nothing
# lost. Fails when the tracer copies a table before draining the parent.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture fork_grandchild
need_python

LEAK=$(fixture_line fork_grandchild.c FG-LEAK)
record_and_report grandchild -- "$FIXTURES/fork_grandchild" 20
J=$WORK/grandchild.json
expect_eq "record exit status (the parent's)" 0 "$REC_RC"
expect_no_match "no refused leak check" 'overlap|no leak check' "$WORK/rec.err"
expect_eq "processes: the parent, 20 children, 20 grandchildren" 41 "$(jget "$J" 'len(d["processes"])')"
GRAND='[p for p in d["processes"] if p.get("exit") == {"status": 3}]'
CHILD='[p for p in d["processes"] if p.get("exit") == {"status": 2}]'
expect_eq "grandchildren" 20 "$(jget "$J" "len($GRAND)")"
expect_eq "every grandchild: 228 bytes in 1 block definitely lost" "[[228, 1]]" \
    "$(jget "$J" "sorted(set((p['leaks_at_exit']['definitely_lost']['bytes'], p['leaks_at_exit']['definitely_lost']['blocks']) for p in $GRAND))" | tr '()' '[]')"
expect_eq "every grandchild: nothing else lost" "[0]" \
    "$(jget "$J" "sorted(set(p['leaks_at_exit']['indirectly_lost']['bytes'] + p['leaks_at_exit']['possibly_lost']['bytes'] for p in $GRAND))")"
expect_eq "every child: nothing lost" "[0]" \
    "$(jget "$J" "sorted(set(p['leaks_at_exit']['definitely_lost']['bytes'] + p['leaks_at_exit']['possibly_lost']['bytes'] for p in $CHILD))")"
expect_eq "the grandchild's loss record names its line" "grandchild:$LEAK" \
    "$(jget "$J" "'%s:%s' % ($GRAND[0]['loss_records'][0]['frames'][0]['function'], $GRAND[0]['loss_records'][0]['frames'][0]['line'])")"
finish
