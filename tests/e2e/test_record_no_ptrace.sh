#!/bin/sh
# Where ptrace is denied (here: a seccomp filter, as a container profile
# would), record still records through the shim: exact counts, cases and
# growth from the markers, the exit status passed through, and one line
# naming what was lost. --iteration needs ptrace: a clear refusal.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture no_ptrace growth_cases exit_status demo_leak

record "$WORK/t.trace" -- "$FIXTURES/growth_cases"
report_json "$WORK/t.trace" "$WORK/t.json"

"$FIXTURES/no_ptrace" "$MEMSLOPE" record -o "$WORK/n.trace" -- "$FIXTURES/growth_cases" >"$WORK/n.out" 2>"$WORK/n.err"
expect_eq "exit status" 0 $?
expect_match "one line says what is lost" "ptrace is not permitted here: recording without it. Lost: the leak check" "$WORK/n.err"
report_json "$WORK/n.trace" "$WORK/n.json"
expect_eq "allocations as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["allocations"]')" "$(jget "$WORK/n.json" 'd["totals"]["allocations"]')"
expect_eq "frees as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["frees"]')" "$(jget "$WORK/n.json" 'd["totals"]["frees"]')"
expect_eq "allocated bytes as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["allocated_bytes"]')" "$(jget "$WORK/n.json" 'd["totals"]["allocated_bytes"]')"
expect_eq "leaky growth from the markers" 48 "$(jget "$WORK/n.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "leaky setup" 1048576 "$(jget "$WORK/n.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["setup"]["bytes"]')"
expect_eq "no leak figures" null "$(jget "$WORK/n.json" 'd["leaks_at_exit"]')"
jget "$WORK/n.json" 'd["warnings"]' >"$WORK/n.warnings"
expect_match "the report says why" "no leak check .*ptrace is not permitted" "$WORK/n.warnings"

"$FIXTURES/no_ptrace" "$MEMSLOPE" record -o "$WORK/s.trace" -- "$FIXTURES/exit_status" >/dev/null 2>&1
expect_eq "exit status passed through" 42 $?

"$FIXTURES/no_ptrace" "$MEMSLOPE" record -o "$WORK/e.trace" -- sh -c "exec '$FIXTURES/demo_leak'" >/dev/null 2>&1
expect_eq "exec chain: exit" 0 $?
report_json "$WORK/e.trace" "$WORK/e.json"
expect_eq "exec chain: the exec'd program is the one reported" 217 "$(jget "$WORK/e.json" 'd["totals"]["allocations"]')"

"$FIXTURES/no_ptrace" "$MEMSLOPE" record -o "$WORK/i.trace" --iteration main -- "$FIXTURES/demo_leak" >/dev/null 2>"$WORK/i.err"
expect_eq "--iteration refused" 1 $?
expect_match "--iteration: says it needs ptrace" "and --iteration needs it" "$WORK/i.err"
finish
