#!/bin/sh
# A trace read from standard input or a pipe: `record -o - -- CMD | report -`
# (record's closing line suggested `memslope report -`, which tried to open
# a file named "-"), `report - < FILE`, gate and diff the same way, a named
# FIFO as the trace; what is not a trace says so.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
need_python
cd "$WORK" || fail "cannot enter $WORK"

allocations() { jget "$1" 'd["totals"]["allocations"]'; }

timeout -k 5 60 "$MEMSLOPE" record -o - -- "$FIXTURES/demo_leak" 2>record.err |
    timeout -k 5 60 "$MEMSLOPE" report --format json - >piped.json 2>report.err
expect_eq "record -o - | report -: the whole trace read" 217 "$(allocations piped.json)"
expect_match "record says where the trace went and how to read it" \
    '^memslope: trace written to standard output \(memslope report - reads it from a pipe\)$' record.err
expect_eq "... and report has nothing to warn of" "" "$(cat report.err)"

record demo.trace -- "$FIXTURES/demo_leak"
expect_eq "record exit" 0 "$REC_RC"
timeout -k 5 60 "$MEMSLOPE" report --format json - <demo.trace >redirected.json 2>report.err
expect_eq "report - < FILE: exit" 0 "$?"
expect_eq "report - < FILE: the trace" 217 "$(allocations redirected.json)"

timeout -k 5 60 "$MEMSLOPE" gate --max-leaked 1 - <demo.trace >gate.out 2>&1
expect_eq "gate - < FILE: the leak fails the gate" 1 "$?"
expect_match "... naming the site" "FAIL case 'demo_leak': leaked .* top site leaky_site \(demo_leak\.c:" gate.out

cat demo.trace | timeout -k 5 60 "$MEMSLOPE" diff demo.trace - >diff.out 2>&1
expect_eq "diff FILE - (the same trace piped): exit" 0 "$?"
expect_match "... compares the two" '^memslope diff: OLD demo\.trace -> NEW -$' diff.out

mkfifo trace.fifo
timeout 30 sh -c 'cat demo.trace >trace.fifo' &
writer=$!
timeout -k 5 60 "$MEMSLOPE" report --format json trace.fifo >fifo.json 2>report.err
expect_eq "report FIFO: exit" 0 "$?"
wait $writer
expect_eq "report FIFO: the trace" 217 "$(allocations fifo.json)"

# Cut short in the pipe: what came through is reported, with the warning.
head -c $(($(wc -c <demo.trace) / 2)) demo.trace | timeout -k 5 60 "$MEMSLOPE" report - >cut.txt 2>cut.err
expect_eq "a trace cut short in the pipe: exit" 0 "$?"
expect_match "... said, naming standard input" \
    '^memslope report: warning: standard input is incomplete \(.*\): recording was cut short' cut.err

timeout -k 5 60 "$MEMSLOPE" report - </dev/null >null.out 2>null.err
expect_eq "report - < /dev/null: exit" 1 "$?"
expect_match "... says what standard input is not" \
    '^memslope report: standard input: not a regular file, pipe or FIFO$' null.err
printf '' | timeout -k 5 60 "$MEMSLOPE" report - >empty.out 2>empty.err
expect_eq "an empty pipe: exit" 1 "$?"
expect_match "... says it is no trace" '^memslope report: standard input: empty file, not a memslope trace' empty.err

# Standard input redirected from the trace that -o names: refused, as
# `report X -o X` is (the report replaced the trace).
cp demo.trace same.trace
timeout -k 5 60 "$MEMSLOPE" report -o same.trace - <same.trace >same.out 2>same.err
expect_eq "report -o X - < X: refused" 1 "$?"
expect_match "... saying why" 'names the trace being read' same.err
expect_eq "... the trace left as it was" "$(cksum <demo.trace)" "$(cksum <same.trace)"

# An endless stream that is no trace is refused at its first bytes, not
# read into memory until it runs out.
yes | timeout -k 5 30 "$MEMSLOPE" report - >yes.out 2>yes.err
expect_eq "yes | report -: refused at once" 1 "$?"
expect_match "... as no trace" '^memslope report: standard input: not a memslope trace \(bad magic\)$' yes.err

# Standard input holds one trace.
timeout -k 5 30 "$MEMSLOPE" diff - - <demo.trace >twice.out 2>twice.err
expect_eq "diff - -: a usage error" 2 "$?"
expect_match "... saying what to give" 'standard input holds one trace' twice.err
timeout -k 5 30 "$MEMSLOPE" gate --baseline - --max-leaked 1 - <demo.trace >twice.out 2>twice.err
expect_eq "gate --baseline - -: a usage error" 2 "$?"
expect_match "... saying what to give" 'standard input holds one trace' twice.err

# A terminal on standard input would wait for a trace nobody types.
if command -v script >/dev/null 2>&1; then
    timeout -k 5 30 script -qec "\"$MEMSLOPE\" report -" /dev/null </dev/null >tty.out 2>&1
    expect_match "report - on a terminal: refused, saying what to do" \
        'standard input is a terminal, not a trace: pipe one in' tty.out
else
    log "script (util-linux) not installed: the terminal case skipped"
fi
finish
