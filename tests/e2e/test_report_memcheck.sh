#!/bin/sh
# memslope report, in every format, runs clean under memcheck (no invalid
# access, no use of uninitialised values, no leak) on a trace of a few
# hundred thousand allocations with cases and leaks.
. "$(dirname "$0")/lib.sh"
need_memslope
need_valgrind
need_fixture threads growth_cases

record "$WORK/t.trace" -- "$FIXTURES/threads" 100
record "$WORK/g.trace" -- "$FIXTURES/growth_cases"
for trace in t g; do
    for format in text json speedscope collapsed html pprof; do
        metric=""
        [ "$format" = collapsed ] && metric="--metric allocated"
        # shellcheck disable=SC2086
        timeout "$VALGRIND_TIMEOUT" valgrind -q --error-exitcode=9 --leak-check=full \
            --errors-for-leak-kinds=definite,indirect "$MEMSLOPE" report "$WORK/$trace.trace" --format "$format" \
            $metric -o "$WORK/$trace.$format" >"$WORK/vg.out" 2>"$WORK/vg.err"
        rc=$?
        expect_eq "report $trace --format $format under memcheck: exit" 0 "$rc"
        [ "$rc" -eq 0 ] || sed 's/^/    > /' "$WORK/vg.err" | head -n 20
    done
done
finish
