#!/bin/sh
# Where record writes its trace (issue 19): a device or a FIFO given to -o is
# written into, never replaced by a regular file (as root, -o /dev/null
# turned /dev/null into a file); "-" is standard output; a regular file is
# replaced atomically; a command that cannot run removes what it created
# and nothing else.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
[ "$(id -u)" -eq 0 ] || skip "needs root to make a device node with mknod"

mknod "$WORK/null" c 1 3 || fail "cannot make a device node in $WORK"
"$MEMSLOPE" record -o "$WORK/null" -- "$FIXTURES/demo_leak" >/dev/null 2>&1
expect_eq "-o a device: exit" 0 "$?"
expect_eq "-o a device: still a character device" "character special file" "$(stat -c %F "$WORK/null")"

mkfifo "$WORK/fifo"
cat "$WORK/fifo" >"$WORK/from-fifo.trace" &
reader=$!
"$MEMSLOPE" record -o "$WORK/fifo" -- "$FIXTURES/demo_leak" >/dev/null 2>&1
expect_eq "-o a FIFO: exit" 0 "$?"
wait $reader
expect_eq "-o a FIFO: still a FIFO" "fifo" "$(stat -c %F "$WORK/fifo")"
report_json "$WORK/from-fifo.trace" "$WORK/fifo.json"
expect_eq "-o a FIFO: the trace came through it" 217 "$(jget "$WORK/fifo.json" 'd["totals"]["allocations"]')"

"$MEMSLOPE" record -o - -- "$FIXTURES/demo_leak" >"$WORK/stdout.trace" 2>/dev/null
expect_eq "-o -: exit" 0 "$?"
report_json "$WORK/stdout.trace" "$WORK/stdout.json"
expect_eq "-o -: the trace on standard output" 217 "$(jget "$WORK/stdout.json" 'd["totals"]["allocations"]')"

echo old >"$WORK/regular.trace"
"$MEMSLOPE" record -o "$WORK/regular.trace" -- "$FIXTURES/demo_leak" >/dev/null 2>&1
report_json "$WORK/regular.trace" "$WORK/regular.json"
expect_eq "-o a regular file: replaced" 217 "$(jget "$WORK/regular.json" 'd["totals"]["allocations"]')"

"$MEMSLOPE" record -o "$WORK/null" -- "$WORK/no-such-program" >/dev/null 2>&1
expect_eq "a command that cannot run: exit" 127 "$?"
expect_eq "... leaves the device alone" "character special file" "$(stat -c %F "$WORK/null")"
"$MEMSLOPE" record -o "$WORK/gone.trace" -- "$WORK/no-such-program" >/dev/null 2>&1
expect_eq "... and removes the trace it began" "absent" "$([ -e "$WORK/gone.trace" ] && echo present || echo absent)"
finish
