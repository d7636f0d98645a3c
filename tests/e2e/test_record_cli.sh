#!/bin/sh
# The command line around record: --help, --version, help record, an unknown
# subcommand, `report` without a file, --clock's values and what --verbose
# says of the clock.
. "$(dirname "$0")/lib.sh"
need_memslope

run() { # ARGS...: exit status in RC, output in $WORK/o, $WORK/e
    log "\$ memslope $*"
    timeout -k 5 30 "$MEMSLOPE" "$@" >"$WORK/o" 2>"$WORK/e" </dev/null
    RC=$?
    log "  -> exit $RC"
}

run --version
expect_eq "--version: exit status" 0 "$RC"
expect_match "--version: prints the version" '[0-9]+\.[0-9]+\.[0-9]+' "$WORK/o"
run --help
expect_eq "--help: exit status" 0 "$RC"
expect_match "--help: lists record" 'record' "$WORK/o"
expect_match "--help: lists report" 'report' "$WORK/o"
run help record
expect_eq "help record: exit status" 0 "$RC"
expect_match "help record: describes -o" '(-o|--output)' "$WORK/o"
run no-such-subcommand
expect_eq "unknown subcommand: exit status" 2 "$RC"
expect_match "unknown subcommand: names it" 'no-such-subcommand' "$WORK/e"
run
expect_eq "no arguments: exit status" 2 "$RC"
run report
expect_eq "report without a file: exit status" 2 "$RC"
run record --clock sundial -- true
expect_eq "record --clock sundial: exit status" 2 "$RC"
expect_match "record --clock sundial: names the values" 'auto, tsc or monotonic, not: sundial' "$WORK/e"
run record --clock monotonic --verbose -o "$WORK/m.trace" -- true
expect_eq "record --clock monotonic: exit status" 0 "$RC"
expect_match "record --clock monotonic --verbose: says so" 'stamped with CLOCK_MONOTONIC \(--clock\)' "$WORK/e"
finish
