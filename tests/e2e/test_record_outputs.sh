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
timeout 60 cat "$WORK/fifo" >"$WORK/from-fifo.trace" &
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

# Never through a symbolic link another user planted; one's own link to a
# regular file: the file is replaced, the link kept.
echo precious >"$WORK/victim"
ln -s victim "$WORK/planted.trace"
chown -h 65534 "$WORK/planted.trace"
"$MEMSLOPE" record -o "$WORK/planted.trace" -- "$FIXTURES/demo_leak" >"$WORK/planted.out" 2>"$WORK/planted.err"
expect_eq "-o another user's symlink: refused" 1 "$?"
expect_match "... says why" 'planted\.trace is a symbolic link owned by another user' "$WORK/planted.err"
expect_eq "... nothing was run" "" "$(cat "$WORK/planted.out")"
expect_eq "... its target untouched" precious "$(cat "$WORK/victim")"
ln -s regular.trace "$WORK/my-link.trace"
"$MEMSLOPE" record -o "$WORK/my-link.trace" -- "$FIXTURES/demo_leak" >/dev/null 2>&1
expect_eq "-o my own link: still a link" "symbolic link" "$(stat -c %F "$WORK/my-link.trace")"

# Two recordings to one path: the second is refused while the first runs,
# and the first's trace is the one left.
"$MEMSLOPE" record --quiet -o "$WORK/shared.trace" -- sleep 3 >/dev/null 2>"$WORK/first.err" &
first=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$WORK/shared.trace" ] && break; sleep 0.1; done
timeout -k 5 60 "$MEMSLOPE" record -o "$WORK/shared.trace" -- "$FIXTURES/demo_leak" >"$WORK/second.out" 2>"$WORK/second.err"
expect_eq "a second record to the same -o: refused" 1 "$?"
expect_match "... says why" 'shared\.trace is being written by another memslope' "$WORK/second.err"
expect_no_match "... does not say written" 'trace written' "$WORK/second.err"
expect_eq "... its command did not run" "" "$(cat "$WORK/second.out")"
wait $first
expect_eq "the first: exit" 0 "$?"
report_json "$WORK/shared.trace" "$WORK/shared.json"
expect_eq "the first's trace is the one left" sleep "$(jget "$WORK/shared.json" 'd["command"][0]')"

# A trace read while it is still written: said so, not "cut short".
"$MEMSLOPE" record -o "$WORK/live.trace" -- sleep 2 >/dev/null 2>&1 &
recording=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$WORK/live.trace" ] && break; sleep 0.1; done
"$MEMSLOPE" report "$WORK/live.trace" >/dev/null 2>"$WORK/live.err"
expect_match "a trace still written: said" 'is still being written by a memslope record that has not finished' "$WORK/live.err"
expect_no_match "... not 'cut short'" 'cut short' "$WORK/live.err"
wait $recording

# A trace replaced while it is written: said, not "written".
"$MEMSLOPE" record -o "$WORK/moved.trace" -- sleep 2 >/dev/null 2>"$WORK/moved.err" &
first=$!
for _ in 1 2 3 4 5 6 7 8 9 10; do [ -s "$WORK/moved.trace" ] && break; sleep 0.1; done
echo other >"$WORK/other"
mv "$WORK/other" "$WORK/moved.trace"
wait $first
expect_eq "a trace replaced while written: exit" 1 "$?"
expect_match "... says what happened" 'another program replaced or removed this file' "$WORK/moved.err"
expect_no_match "... does not say written" 'trace written' "$WORK/moved.err"

# -o naming the program to record, or report -o naming the trace it
# reads: refused, both files left as they were (the program was once
# replaced by the trace, the exec failed and the trace was removed).
cp "$FIXTURES/demo_leak" "$WORK/program"
"$MEMSLOPE" record -o "$WORK/program" -- "$WORK/program" >/dev/null 2>"$WORK/program.err"
expect_eq "-o the program itself: exit" 1 "$?"
expect_match "... says why" 'names the program to record' "$WORK/program.err"
expect_eq "... the program is left" 0 "$(cmp -s "$FIXTURES/demo_leak" "$WORK/program"; echo $?)"
(cd "$WORK" && PATH="$WORK:$PATH" "$MEMSLOPE" record -o program -- program >/dev/null 2>&1)
expect_eq "... found on PATH: refused too" 1 "$?"
cp "$WORK/regular.trace" "$WORK/input.trace"
"$MEMSLOPE" report "$WORK/input.trace" -o "$WORK/input.trace" 2>"$WORK/input.err"
expect_eq "report -o its own trace: exit" 1 "$?"
expect_match "... says why" 'names the trace being read' "$WORK/input.err"
expect_eq "... the trace is left" 0 "$(cmp -s "$WORK/regular.trace" "$WORK/input.trace"; echo $?)"

# A full disk: said once (it was said twice), the trace cut where it filled.
mkdir "$WORK/small"
if mount -t tmpfs -o size=12k tmpfs "$WORK/small" 2>/dev/null; then
    head -c 8192 /dev/zero >"$WORK/small/fill" # one 4 KiB page left
    "$MEMSLOPE" record -o "$WORK/small/full.trace" -- "$FIXTURES/growth_cases" >/dev/null 2>"$WORK/full.err"
    rc=$?
    expect_eq "a full disk: exit" 1 "$rc"
    expect_eq "... said once" 1 "$(grep -c 'No space left on device' "$WORK/full.err")"
    "$MEMSLOPE" report "$WORK/small/full.trace" >/dev/null 2>"$WORK/full-report.err"
    expect_eq "... the trace reads up to the cut" 0 "$?"
    umount "$WORK/small"
else
    log "skipped: the full-disk case needs a tmpfs mount"
fi
finish
