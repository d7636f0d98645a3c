#!/bin/sh
# memslope gate: exit 0 within limits, 1 over a limit with one line naming
# the case, the figure, the limit, the top site and the process; 2 on bad
# usage or an unreadable trace. --max-peak; --baseline OLD.trace with and
# without --tolerance on fixtures/session_leak, whose leak doubles from
# version 1 to version 2.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture growth_cases session_leak

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

# --max-peak: leaky peaks at 1,053,376 bytes (its 1 MiB buffer and 100 x 48 B).
"$MEMSLOPE" gate "$WORK/g.trace" --max-peak 1053376 --case leaky >"$WORK/out" 2>&1
expect_eq "peak at the limit passes" 0 $?
"$MEMSLOPE" gate "$WORK/g.trace" --max-peak 1M --case leaky >"$WORK/out" 2>&1
expect_eq "peak over the limit fails" 1 $?
expect_match "peak failure line" "FAIL case 'leaky': peak 1.0 MiB \\(1053376 B\\) > limit 1.0 MiB \\(1048576 B\\); top site main \\(growth_cases.c:[0-9]+\\) \\(1048576 bytes live at the peak\\); process growth_cases \\(pid [0-9]+\\)" "$WORK/out"

# --baseline: version 2 loses twice what version 1 does at make_session <- open_user.
MAKE=$(fixture_line session_leak.c SL-MAKE)
record "$WORK/v1.trace" -- "$FIXTURES/session_leak" 1
record "$WORK/v1b.trace" -- "$FIXTURES/session_leak" 1
record "$WORK/v2.trace" -- "$FIXTURES/session_leak" 2
"$MEMSLOPE" gate "$WORK/v1b.trace" --baseline "$WORK/v1.trace" >"$WORK/out" 2>&1
expect_eq "baseline: the same version passes" 0 $?
expect_match "baseline: the summary" "^memslope gate: ok: 1 case checked in 1 process, 0 limits exceeded$" "$WORK/out"
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/v1.trace" >"$WORK/out" 2>&1
expect_eq "baseline: the doubled leak fails" 1 $?
expect_match "baseline: growth" "^memslope gate: FAIL case 'requests': growth 144 B per iteration > baseline 96 B per iteration; top site make_session \\(session_leak.c:$MAKE\\) <- open_user \\(\\+48 B per iteration\\); process session_leak \\(pid [0-9]+\\)$" "$WORK/out"
expect_match "baseline: leaks" "^memslope gate: FAIL case 'requests': leaked 14.1 KiB > baseline 9.4 KiB; top site make_session \\(session_leak.c:$MAKE\\) <- open_user \\(\\+4.7 KiB\\)" "$WORK/out"
expect_match "baseline: peak" "^memslope gate: FAIL case 'requests': peak 18.1 KiB > baseline 13.4 KiB" "$WORK/out"
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/v1.trace" --tolerance 50% >"$WORK/out" 2>&1
expect_eq "baseline + 50%: 144 <= 96 x 1.5, 14,400 <= 9,600 x 1.5" 0 $?
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/v1.trace" --tolerance 49% >"$WORK/out" 2>&1
expect_eq "baseline + 49% fails" 1 $?
expect_match "baseline + 49%: named" "growth 144 B per iteration > baseline 96 B per iteration \\+ 49%" "$WORK/out"
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/v1.trace" --tolerance 5K >"$WORK/out" 2>&1
expect_eq "baseline + 5K (bytes, or bytes per iteration for growth) passes" 0 $?
"$MEMSLOPE" gate "$WORK/v1.trace" --baseline "$WORK/v2.trace" >"$WORK/out" 2>&1
expect_eq "baseline: less than the baseline passes" 0 $?
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/missing.trace" >"$WORK/out" 2>&1
expect_eq "baseline missing: exit 2" 2 $?
"$MEMSLOPE" gate "$WORK/v2.trace" --tolerance 10% >"$WORK/out" 2>&1
expect_eq "--tolerance without --baseline is a usage error" 2 $?
"$MEMSLOPE" gate "$WORK/v2.trace" --baseline "$WORK/v1.trace" --tolerance ten >"$WORK/out" 2>&1
expect_eq "bad --tolerance is a usage error" 2 $?

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
