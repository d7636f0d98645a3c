#!/bin/sh
# Where ptrace is denied (here: a seccomp filter that also denies
# process_vm_readv/writev, as Docker's default profile does), record still
# records through the shim: exact counts, cases and growth from the markers,
# the exit status passed through, and one line naming what was lost. The
# leak check at exit runs from inside the process (it hands its own
# /proc/self/mem and maps over): the same figures as with ptrace, also at
# _exit; a killed process has no check and the report says why.
# --iteration needs ptrace: a clear refusal.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture no_ptrace growth_cases exit_status demo_leak leak_cycle exit_paths killed
need_python

LOST_LINE="memslope: ptrace is not permitted here: recording without it. Lost:"

# leaks_of JSON: "def_bytes/def_blocks ind.. pos.. reach.." of leaks_at_exit.
leaks_of() {
    jget "$1" '" ".join("%d/%d" % (d["leaks_at_exit"][k]["bytes"], d["leaks_at_exit"][k]["blocks"]) for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))'
}
no_warning_about_the_check() { # JSON WHAT
    jget "$1" 'd.get("warnings", [])' >"$WORK/w.txt"
    expect_no_match "$2: no 'no leak check' warning" "no leak check" "$WORK/w.txt"
}

# --- growth_cases: counts, markers, and the check at exit as with ptrace ---
record_and_report t -- "$FIXTURES/growth_cases"
record_no_ptrace "$WORK/n.trace" -- "$FIXTURES/growth_cases"
expect_eq "exit status" 0 "$REC_RC"
expect_eq "one line on stderr about ptrace" 1 "$(grep -c "ptrace is not permitted" "$WORK/rec.err")"
expect_match "the line says what is lost" "^$LOST_LINE --iteration, children \(not followed\), snapshots with the world stopped" "$WORK/rec.err"
expect_match "the line names the other threads' registers" "other threads' registers at the exit check" "$WORK/rec.err"
expect_no_match "the leak check at exit is not said to be lost" "Lost: the leak check," "$WORK/rec.err"
report_json "$WORK/n.trace" "$WORK/n.json"
expect_eq "allocations as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["allocations"]')" "$(jget "$WORK/n.json" 'd["totals"]["allocations"]')"
expect_eq "frees as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["frees"]')" "$(jget "$WORK/n.json" 'd["totals"]["frees"]')"
expect_eq "allocated bytes as with ptrace" "$(jget "$WORK/t.json" 'd["totals"]["allocated_bytes"]')" "$(jget "$WORK/n.json" 'd["totals"]["allocated_bytes"]')"
expect_eq "leaky growth from the markers" 48 "$(jget "$WORK/n.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["growth"]["bytes_per_iteration"]')"
expect_eq "leaky setup" 1048576 "$(jget "$WORK/n.json" '[c for c in d["cases"] if c["name"]=="leaky"][0]["setup"]["bytes"]')"
expect_eq "growth_cases: leaks at exit as with ptrace" "$(leaks_of "$WORK/t.json")" "$(leaks_of "$WORK/n.json")"
no_warning_about_the_check "$WORK/n.json" growth_cases

# --- demo_leak: figures known in advance, and equal to ptrace mode's ---
record_and_report pdemo -- "$FIXTURES/demo_leak"
record_no_ptrace "$WORK/ndemo.trace" -- "$FIXTURES/demo_leak"
expect_eq "demo_leak: exit status" 0 "$REC_RC"
report_json "$WORK/ndemo.trace" "$WORK/ndemo.json"
expect_eq "demo_leak with ptrace: leaks at exit" "4800/100 0/0 0/0 1152/17" "$(leaks_of "$WORK/pdemo.json")"
expect_eq "demo_leak without ptrace: leaks at exit" "4800/100 0/0 0/0 1152/17" "$(leaks_of "$WORK/ndemo.json")"
expect_site "$WORK/ndemo.json" leaky_site "$(fixture_line demo_leak.c DEMO-LEAK)" leaked_bytes=4800 leaked_blocks=100
no_warning_about_the_check "$WORK/ndemo.json" demo_leak
log "\$ memslope gate $WORK/ndemo.trace --max-leaked 0"
timeout -k 5 60 "$MEMSLOPE" gate "$WORK/ndemo.trace" --max-leaked 0 >"$WORK/gate.out" 2>&1
expect_eq "gate --max-leaked 0 fails on the no-ptrace trace of a leak" 1 $?
sed 's/^/    | /' "$WORK/gate.out" | head -n 5

# --- leak_cycle: a dropped cycle (1 definitely, 3 indirectly lost) ---
record_and_report pcycle -- "$FIXTURES/leak_cycle" </dev/null
record_no_ptrace "$WORK/ncycle.trace" -- "$FIXTURES/leak_cycle" </dev/null
expect_eq "leak_cycle: exit status" 0 "$REC_RC"
report_json "$WORK/ncycle.trace" "$WORK/ncycle.json"
expect_eq "leak_cycle with ptrace: leaks at exit" "32/1 96/3 0/0 96/3" "$(leaks_of "$WORK/pcycle.json")"
expect_eq "leak_cycle without ptrace: leaks at exit" "32/1 96/3 0/0 96/3" "$(leaks_of "$WORK/ncycle.json")"

# --- _exit: no exit() handlers; the interposed _exit runs the check ---
record_and_report pexit -- "$FIXTURES/exit_paths" _exit
record_no_ptrace "$WORK/nexit.trace" -- "$FIXTURES/exit_paths" _exit
expect_eq "_exit: exit status" 12 "$REC_RC"
report_json "$WORK/nexit.trace" "$WORK/nexit.json"
expect_eq "_exit: leaks at exit as with ptrace" "$(leaks_of "$WORK/pexit.json")" "$(leaks_of "$WORK/nexit.json")"
expect_eq "_exit: leaks at exit" "0/0 0/0 0/0 1203/6" "$(leaks_of "$WORK/nexit.json")"
no_warning_about_the_check "$WORK/nexit.json" _exit

# --- SIGKILL: no check, a readable trace, and the report says why ---
record_no_ptrace "$WORK/nkill.trace" -- "$FIXTURES/killed"
expect_eq "killed: exit status" 137 "$REC_RC"
report_json "$WORK/nkill.trace" "$WORK/nkill.json"
expect_eq "killed: every allocation before the kill" 6 "$(jget "$WORK/nkill.json" 'd["totals"]["allocations"]')"
expect_eq "killed: no leak figures" null "$(jget "$WORK/nkill.json" 'd["leaks_at_exit"]')"
jget "$WORK/nkill.json" 'd["warnings"]' >"$WORK/nkill.warnings"
expect_match "killed: the report says why" "no leak check .*ptrace is not permitted.*killed by signal 9" "$WORK/nkill.warnings"

# --- exit status, exec chains, --iteration ---
record_no_ptrace "$WORK/s.trace" -- "$FIXTURES/exit_status"
expect_eq "exit status passed through" 42 "$REC_RC"

record_no_ptrace "$WORK/e.trace" -- sh -c "exec '$FIXTURES/demo_leak'"
expect_eq "exec chain: exit" 0 "$REC_RC"
report_json "$WORK/e.trace" "$WORK/e.json"
expect_eq "exec chain: the exec'd program is the one reported" 217 "$(jget "$WORK/e.json" 'd["totals"]["allocations"]')"
expect_eq "exec chain: its leak check" "4800/100 0/0 0/0 1152/17" "$(leaks_of "$WORK/e.json")"

record_no_ptrace "$WORK/i.trace" --iteration main -- "$FIXTURES/demo_leak"
expect_eq "--iteration refused" 1 "$REC_RC"
expect_match "--iteration: says it needs ptrace" "and --iteration needs it" "$WORK/rec.err"
finish
