#!/bin/sh
# memslope gate when what it is asked to check is missing or unknown (issue
# 19): exit 2 and the reason, never "ok". A trace cut short (a header only,
# a killed memslope), no leak results for --max-leaked (--leak-check off, a
# leak check that failed: "cannot read /proc/PID/maps: Permission denied"),
# unknown growth for --max-growth (fewer than 3 iteration snapshots). A
# limit exceeded elsewhere still gives 1.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak growth_cases non_dumpable
cd "$WORK" || fail "cannot enter $WORK"

# gate_expect WHAT STATUS PATTERN GATE-ARGS...: exit STATUS, PATTERN in its output.
gate_expect() {
    _what=$1 _status=$2 _pattern=$3
    shift 3
    "$MEMSLOPE" gate "$@" >gate.out 2>&1
    expect_eq "$_what: exit" "$_status" "$?"
    expect_match "$_what: says why" "$_pattern" gate.out
    expect_no_match "$_what: never ok" '^memslope gate: ok' gate.out
}

record demo.trace -- "$FIXTURES/demo_leak"
head -c 16 demo.trace >header.trace
gate_expect "a header-only trace" 2 'header\.trace is incomplete .*cut short' header.trace --max-leaked 0
"$MEMSLOPE" report header.trace >header.txt 2>/dev/null
expect_match "a header-only trace: the text report says nothing was recorded" "No process was recorded" header.txt
expect_no_match "a header-only trace: no made-up process" 'unknown command|^Case' header.txt

# memslope killed while it records: whatever the trace holds, it is partial.
"$MEMSLOPE" record --quiet -o killed.trace -- sleep 20 >/dev/null 2>&1 &
tracer=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s killed.trace ] && break; sleep 0.1; done
sleep 0.3
kill -KILL $tracer
wait $tracer 2>/dev/null
gate_expect "a killed memslope's trace" 2 'killed\.trace is incomplete' killed.trace --max-leaked 1G
gate_expect "... with --max-growth" 2 'incomplete' killed.trace --max-growth 1G

record off.trace --leak-check off -- "$FIXTURES/demo_leak"
gate_expect "--leak-check off, --max-leaked" 2 "case 'demo_leak': no leak results \\(recorded with --leak-check off\\)" \
    off.trace --max-leaked 0
gate_expect "... --max-leaked-blocks" 2 'no leak results.*--max-leaked-blocks cannot be checked' \
    off.trace --max-leaked-blocks 1000
"$MEMSLOPE" gate off.trace --max-peak 1G >gate.out 2>&1
expect_eq "--leak-check off, --max-peak alone: checked" 0 "$?"

gate_expect "no iterations, --max-growth" 2 \
    "case 'demo_leak': growth unknown: 0 iterations recorded.*--max-growth cannot be checked" demo.trace --max-growth 0
expect_match "... the summary" '^memslope gate: cannot check: 1 case checked in 1 process, 0 limits exceeded, 1 figure unknown' gate.out

# A limit exceeded is a failure (1) even when another figure is unknown.
"$MEMSLOPE" gate demo.trace --max-growth 0 --max-leaked 0 >gate.out 2>&1
expect_eq "a leak over the limit and unknown growth: exit" 1 "$?"
expect_match "... both said" "growth unknown" gate.out
expect_match "... the failure" "FAIL case 'demo_leak': leaked" gate.out

# Named cases with iterations: growth known, the gate passes as before.
record g.trace -- "$FIXTURES/growth_cases"
"$MEMSLOPE" gate g.trace --max-growth 1M --max-leaked 1M >gate.out 2>&1
expect_eq "growth and leaks known: ok" 0 "$?"

# A leak check that failed: a non-root memslope cannot read a non-dumpable
# process's maps.
if [ "$(id -u)" -eq 0 ] && command -v setpriv >/dev/null 2>&1; then
    shared=$(mktemp -d "${TMPDIR:-/tmp}/memslope-gate-nobody.XXXXXX") && chmod 777 "$shared" ||
        fail "cannot make a folder nobody can write"
    (cd "$shared" && timeout -k 5 60 setpriv --reuid=65534 --regid=65534 --clear-groups \
        "$MEMSLOPE" record --quiet -o nd.trace -- "$FIXTURES/non_dumpable") >nd.out 2>&1
    expect_eq "non-dumpable, as nobody: exit" 0 "$?"
    gate_expect "a failed leak check" 2 \
        "no leak results \\(no leak check for process [0-9]+: .*cannot read /proc/[0-9]+/maps.*Permission denied\\)" \
        "$shared/nd.trace" --max-leaked 0
    rm -rf "$shared"
else
    log "not root or no setpriv: the failed leak check is not exercised"
fi

# A shell's children that ran commands by exec: those images' heaps went
# with the exec, nothing is unknown (each made a warning line: 38 for a
# python3 run through pyenv's shims).
record shell.trace -- sh -c 'ls / | cat >/dev/null'
"$MEMSLOPE" gate shell.trace --max-leaked 1000000 >shell.out 2>&1
expect_eq "images replaced by exec: exit" 0 "$?"
expect_no_match "... no warning about them" 'no leak results' shell.out
finish
