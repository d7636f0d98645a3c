#!/bin/sh
# --iteration on a program that has SIGTRAP of its own (issue 19): our int3
# traps inside its SIGTRAP handler, where SIGTRAP is blocked, and the kernel
# resets the handler; the program's next SIGTRAP killed it (exit 133).
# memslope puts the handler back: the program runs as without memslope, and
# every call is an iteration.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture sigtrap_handler
cd "$WORK" || fail "cannot enter $WORK"

# iterations TRACE: the iterations of the trace's cases, summed.
iterations() {
    report_json "$1" "$1.json" >/dev/null
    jget "$1.json" 'sum(c["iterations"] for c in d["cases"])'
}

record handler.trace --iteration on_trap -- "$FIXTURES/sigtrap_handler"
expect_eq "--iteration on the SIGTRAP handler: exit" 0 "$REC_RC"
expect_eq "... the program's own output" "traps 10" "$(cat "$WORK/rec.out")"
expect_eq "... every call an iteration" 10 "$(iterations handler.trace)"

record inner.trace --iteration trap_step -- "$FIXTURES/sigtrap_handler"
expect_eq "--iteration on a function the handler calls: exit" 0 "$REC_RC"
expect_eq "... the program's own output" "traps 10" "$(cat "$WORK/rec.out")"
expect_eq "... every call an iteration" 10 "$(iterations inner.trace)"

finish
