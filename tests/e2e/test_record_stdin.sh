#!/bin/sh
# stdin_reader: the target reads a pipe through memslope record; its stdout
# passes through unchanged, it sees every line, it allocates one node per
# line; totals equal memcheck's with the same redirections.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture stdin_reader
need_python

LINE=$(fixture_line stdin_reader.c STDIN-LINE)
printf 'line 1: a\nline 2: b\nline 3: c\n3 lines\n' >"$WORK/expected.out"

# feed DATA...: a fresh FIFO in $WORK/in.fifo with printf DATA... written to it
# in the background; redirect the reader's stdin from it (a pipe, as in
# `printf ... | memslope record`, without losing $? to a subshell).
feed() {
    rm -f "$WORK/in.fifo"
    mkfifo "$WORK/in.fifo" || fail "mkfifo failed"
    ("$@" >"$WORK/in.fifo" &)
}

feed printf 'a\nb\nc\n'
record "$WORK/stdin.trace" -- "$FIXTURES/stdin_reader" <"$WORK/in.fifo"
expect_eq "record exit status" 0 "$REC_RC"
if cmp -s "$WORK/expected.out" "$WORK/rec.out"; then
    log "ok       stdout passes through unchanged"
else
    expect_eq "stdout of the target" "$(cat "$WORK/expected.out")" "$(cat "$WORK/rec.out")"
fi
expect_eq "memslope adds nothing to stdout" "$(wc -c <"$WORK/expected.out")" "$(wc -c <"$WORK/rec.out")"
report_json "$WORK/stdin.trace" "$WORK/stdin.json"
expect_site "$WORK/stdin.json" main "$LINE" allocations=3 allocated_bytes=384 live_bytes=384

if command -v valgrind >/dev/null 2>&1; then
    feed printf 'a\nb\nc\n'
    vg_run stdin -- "$FIXTURES/stdin_reader" <"$WORK/in.fifo"
    expect_eq "stdout under memcheck (sanity)" "$(cat "$WORK/expected.out")" "$(cat "$WORK/vg.stdin.out")"
    vg_totals "$(vg_log stdin)"
    expect_vg_totals "$WORK/stdin.json"
fi

# A longer input, and an input that ends without a newline.
feed seq 1 2000
record "$WORK/seq.trace" -- "$FIXTURES/stdin_reader" <"$WORK/in.fifo"
expect_eq "2000 lines: record exit status" 0 "$REC_RC"
expect_eq "2000 lines: last line of stdout" "2000 lines" "$(tail -n 1 "$WORK/rec.out")"
expect_eq "2000 lines: stdout lines" 2001 "$(wc -l <"$WORK/rec.out")"
report_json "$WORK/seq.trace" "$WORK/seq.json"
expect_site "$WORK/seq.json" main "$LINE" allocations=2000 allocated_bytes=256000 live_bytes=256000

feed printf 'x\ny'
record "$WORK/nonl.trace" -- "$FIXTURES/stdin_reader" <"$WORK/in.fifo"
expect_eq "no final newline: stdout" "$(printf 'line 1: x\nline 2: y\n2 lines')" "$(cat "$WORK/rec.out")"
finish
