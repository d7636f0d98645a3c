#!/bin/sh
# Bad input to `memslope record`: no command (exit 2 with usage), a command
# that does not exist (exit 127, "memslope: cannot run 'x': No such file or
# directory"), an output path in a folder that does not exist (an error
# before the target starts: the target must not run), an unknown option.
. "$(dirname "$0")/lib.sh"
need_memslope

run() { # OUT-NAME ARGS...: memslope ARGS, exit status in RC
    _o=$1
    shift
    log "\$ memslope $*"
    timeout -k 5 60 "$MEMSLOPE" "$@" >"$WORK/$_o.out" 2>"$WORK/$_o.err" </dev/null
    RC=$?
    log "  -> exit $RC"
    sed 's/^/    | /' "$WORK/$_o.err" | head -n 10
}

run nocmd record
expect_eq "record without a command: exit status" 2 "$RC"
expect_match "record without a command: usage on stderr" '[Uu]sage' "$WORK/nocmd.err"
expect_eq "record without a command: nothing on stdout" "" "$(cat "$WORK/nocmd.out")"

run nocmd2 record -o "$WORK/x.trace" --
expect_eq "record -o FILE -- (no command): exit status" 2 "$RC"
expect_match "record -- : usage on stderr" '[Uu]sage' "$WORK/nocmd2.err"

run badopt record --no-such-option -- true
expect_eq "record --no-such-option: exit status" 2 "$RC"
expect_match "record --no-such-option: names the option" 'no-such-option' "$WORK/badopt.err"

missing=memslope-no-such-command-$$
run nosuch record -o "$WORK/nosuch.trace" -- "$missing" arg
expect_eq "record of a missing command: exit status" 127 "$RC"
expect_eq "record of a missing command: message" \
    "memslope: cannot run '$missing': No such file or directory" "$(cat "$WORK/nosuch.err")"

run nosuchpath record -o "$WORK/nosuch2.trace" -- "$WORK/not/here"
expect_eq "record of a missing path: exit status" 127 "$RC"
expect_eq "record of a missing path: message" \
    "memslope: cannot run '$WORK/not/here': No such file or directory" "$(cat "$WORK/nosuchpath.err")"

# Output in a folder that does not exist: fail before starting the target.
run badout record -o "$WORK/no/such/dir/x.trace" -- touch "$WORK/target-ran"
expect_in "record -o NONEXISTENT/x.trace: exit status (failure or usage)" "1 2" "$RC"
expect_match "record -o NONEXISTENT/x.trace: names the path" "$WORK/no/such/dir" "$WORK/badout.err"
expect_eq "record -o NONEXISTENT/x.trace: the target did not run" no \
    "$([ -e "$WORK/target-ran" ] && echo yes || echo no)"
expect_eq "record -o NONEXISTENT/x.trace: one line on stderr" 1 "$(wc -l <"$WORK/badout.err")"

# Output over a folder: the same.
mkdir -p "$WORK/adir"
run dirout record -o "$WORK/adir" -- touch "$WORK/target-ran2"
expect_in "record -o FOLDER: exit status" "1 2" "$RC"
expect_eq "record -o FOLDER: the target did not run" no \
    "$([ -e "$WORK/target-ran2" ] && echo yes || echo no)"
# --interval below 1ms: refused before anything runs (1ns wrote 170 MB in 10 s).
for interval in 1ns 999us 0; do
    run "interval$interval" record --interval "$interval" -o "$WORK/interval.trace" -- touch "$WORK/interval-ran"
    expect_eq "record --interval $interval: exit status" 2 "$RC"
    expect_match "record --interval $interval: says the minimum" "interval takes a duration of at least 1ms.*not: $interval" \
        "$WORK/interval$interval.err"
done
expect_eq "record --interval too short: the target did not run" no \
    "$([ -e "$WORK/interval-ran" ] && echo yes || echo no)"
run interval1ms record --interval 1ms -o "$WORK/interval.trace" -- true
expect_eq "record --interval 1ms: accepted" 0 "$RC"
finish
