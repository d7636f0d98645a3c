#!/bin/sh
# record's status line: on a terminal (a pty made by script(1)), one line
# on stderr redrawn in place with the elapsed time, the events, the live
# bytes and the open case and iteration, erased before record's closing
# note; nothing when stderr is not a terminal, with --quiet, or TERM=dumb.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture session_leak
command -v script >/dev/null 2>&1 || skip "script(1) is not installed (util-linux; bsdutils on Debian)"

# 20 iterations of 60 ms in case "requests": the line is drawn several times meanwhile.
COMMAND="$FIXTURES/session_leak 1 20 60000"

# on_terminal OUT [RECORD-OPTION...]: record under a pty 200 columns wide; its output in $WORK/OUT.
on_terminal() {
    _out=$1
    shift
    timeout -k 5 60 script -qec "stty cols 200; TERM=${TERM_FOR_TEST:-xterm} '$MEMSLOPE' record -o '$WORK/p.trace' $* -- $COMMAND" \
        /dev/null >"$WORK/$_out" 2>&1
    log "\$ (on a terminal) memslope record $* -> exit $?"
    tr '\r' '\n' <"$WORK/$_out" | sed 's/\x1b\[K/<erase>/g' >"$WORK/$_out.lines"
}

on_terminal tty.out
expect_match "a status line: time, events, live bytes, the case and its iteration" \
    '^<erase>memslope: [0-9]+\.[0-9] s, [0-9,]+ events, [0-9.]+ (B|KiB) live, case requests iteration [0-9]+$' \
    "$WORK/tty.out.lines"
expect_lt "redrawn in place: no line feed inside the status (lines before the note)" 3 \
    "$(grep -c '' "$WORK/tty.out" | tr -d ' ')"
expect_match "erased before the closing note" '^<erase>memslope: trace written to ' "$WORK/tty.out.lines"
# The last status drawn counts the events of 20 iterations so far: at most 3 allocations and 1 free each.
last=$(grep -oE 'case requests iteration [0-9]+$' "$WORK/tty.out.lines" | tail -n 1 | awk '{print $4}')
expect_eq "the iteration shown is one of the 20" yes "$([ "${last:-0}" -ge 1 ] && [ "${last:-0}" -le 20 ] && echo yes || echo no)"

TERM_FOR_TEST=dumb on_terminal dumb.out
expect_no_match "TERM=dumb: no status line" 'events,' "$WORK/dumb.out.lines"

on_terminal quiet.out --quiet
expect_no_match "--quiet: no status line" 'events,' "$WORK/quiet.out.lines"
expect_no_match "--quiet: no closing note" 'trace written' "$WORK/quiet.out.lines"

log "\$ memslope record ... 2>file (not a terminal)"
timeout -k 5 60 "$MEMSLOPE" record -o "$WORK/p.trace" -- $COMMAND >"$WORK/pipe.out" 2>"$WORK/pipe.err"
expect_eq "not a terminal: record exit" 0 "$?"
expect_no_match "not a terminal: no status line" 'events,|\[K' "$WORK/pipe.err"
expect_match "not a terminal: the closing note" '^memslope: trace written to ' "$WORK/pipe.err"
finish
