#!/bin/sh
# memslope gate: exit 0 within limits, 1 over a limit with one line naming
# the case, the figure, the limit and the top site; 2 on bad usage or an
# unreadable trace.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture growth_cases

record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
leak_line=$(grep -n 'malloc(48); /\* the growing site' "$SRC_FIXTURES/growth_cases.c" | cut -d: -f1)

"$MEMSLOPE" gate "$WORK/g.trace" --max-growth 48B --case leaky >"$WORK/out" 2>&1
expect_eq "growth at the limit passes" 0 $?
"$MEMSLOPE" gate "$WORK/g.trace" --max-growth 47 --case leaky >"$WORK/out" 2>&1
expect_eq "growth over the limit fails" 1 $?
expect_match "failure line" "FAIL case 'leaky': growth 48 B per iteration > limit 47 B; top site leak_48 \\(growth_cases.c:$leak_line\\)" "$WORK/out"

"$MEMSLOPE" gate "$WORK/g.trace" --max-growth 100 --case 'l*' >"$WORK/out" 2>&1
expect_eq "glob over leaky and lazy within 100 B" 0 $?

"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked 0 >"$WORK/out" 2>&1
expect_eq "any leak fails --max-leaked 0" 1 $?
expect_eq "one line per failing case" 2 "$(grep -c '^memslope gate: FAIL case' "$WORK/out")"
expect_match "cycle counts definite + indirect" "FAIL case 'cycle': leaked 3.8 KiB" "$WORK/out"

"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked-blocks 100 --case leaky >"$WORK/out" 2>&1
expect_eq "100 blocks within --max-leaked-blocks 100" 0 $?
"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked-blocks 99 --case leaky >"$WORK/out" 2>&1
expect_eq "100 blocks over --max-leaked-blocks 99" 1 $?

"$MEMSLOPE" gate "$WORK/g.trace" --max-leaked 4K --case reachable >"$WORK/out" 2>&1
expect_eq "reachable growth is no leak" 0 $?

"$MEMSLOPE" gate "$WORK/g.trace" >"$WORK/out" 2>&1
expect_eq "no limit is a usage error" 2 $?
"$MEMSLOPE" gate "$WORK/g.trace" --max-growth 1X >"$WORK/out" 2>&1
expect_eq "bad size is a usage error" 2 $?
"$MEMSLOPE" gate "$WORK/g.trace" --max-growth 0 --case nosuch >"$WORK/out" 2>&1
expect_eq "no matching case" 2 $?
"$MEMSLOPE" gate "$WORK/missing.trace" --max-growth 0 >"$WORK/out" 2>&1
expect_eq "missing trace" 2 $?
printf 'not a trace' >"$WORK/foreign"
"$MEMSLOPE" gate "$WORK/foreign" --max-growth 0 >"$WORK/out" 2>&1
expect_eq "foreign file" 2 $?
finish
