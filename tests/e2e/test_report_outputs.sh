#!/bin/sh
# Where report -o writes (issue 19): a device node, a FIFO or a link to
# standard output is written into, never replaced by a regular file (the
# report was written to a temporary file renamed over the path, so as root
# `report -o /dev/stdout` replaced /dev/stdout); '-' is standard output; a
# symbolic link planted by another user is never written through; a regular
# file is replaced whole, and not at all when writing fails.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
[ "$(id -u)" -eq 0 ] || skip "needs root to make a device node with mknod and a link owned by another user"
cd "$WORK" || fail "cannot enter $WORK"

record demo.trace -- "$FIXTURES/demo_leak"
expect_eq "record exit" 0 "$REC_RC"

mknod null c 1 3 || fail "cannot make a device node in $WORK"
"$MEMSLOPE" report demo.trace -o null 2>report.err
expect_eq "-o a device: exit" 0 "$?"
expect_eq "-o a device: still a character device" "character special file" "$(stat -c %F null)"
"$MEMSLOPE" report demo.trace --format suppressions -o null 2>report.err
expect_eq "--format suppressions -o a device: still a device" "character special file" "$(stat -c %F null)"

mkfifo fifo
timeout 30 cat fifo >from-fifo.json &
reader=$!
timeout -k 5 30 "$MEMSLOPE" report demo.trace --format json -o fifo 2>report.err
expect_eq "-o a FIFO: exit" 0 "$?"
wait $reader
expect_eq "-o a FIFO: still a FIFO" fifo "$(stat -c %F fifo)"
expect_eq "-o a FIFO: the report came through it" 217 "$(jget from-fifo.json 'd["totals"]["allocations"]')"

# A link to standard output (as /dev/stdout is), owned by root.
ln -s /proc/self/fd/1 to-stdout
"$MEMSLOPE" report demo.trace --format json -o to-stdout >through-link.json 2>report.err
expect_eq "-o a link to stdout: exit" 0 "$?"
expect_eq "-o a link to stdout: still a link" "symbolic link" "$(stat -c %F to-stdout)"
expect_eq "-o a link to stdout: the report on stdout" 217 "$(jget through-link.json 'd["totals"]["allocations"]')"

"$MEMSLOPE" report demo.trace --format json -o - >dash.json 2>report.err
expect_eq "-o -: the report on stdout" 217 "$(jget dash.json 'd["totals"]["allocations"]')"

echo precious >victim
ln -s victim planted.txt
chown -h 65534 planted.txt
"$MEMSLOPE" report demo.trace -o planted.txt 2>planted.err
expect_eq "-o another user's symlink: refused" 1 "$?"
expect_match "... says why" 'planted\.txt is a symbolic link owned by another user \(uid 65534\)' planted.err
expect_eq "... its target untouched" precious "$(cat victim)"
expect_eq "... the link left alone" "symbolic link" "$(stat -c %F planted.txt)"

# A link of one's own to a regular file: the file is replaced whole, the link
# kept; a chain through a link another user owns is refused.
echo old >mine.txt
ln -s mine.txt my-link
"$MEMSLOPE" report demo.trace -o my-link 2>report.err
expect_eq "-o my own link: still a link" "symbolic link" "$(stat -c %F my-link)"
expect_match "... its target replaced by the report" 'demo_leak: exited 0' mine.txt
ln -s planted.txt via-planted
"$MEMSLOPE" report demo.trace -o via-planted 2>chain.err
expect_eq "-o a link to another user's link: refused" 1 "$?"
expect_eq "... its target untouched" precious "$(cat victim)"

mkdir folder
"$MEMSLOPE" report demo.trace -o folder 2>folder.err
expect_eq "-o a directory: refused" 1 "$?"
expect_match "... says why" 'folder is a directory' folder.err

echo old >regular.txt
"$MEMSLOPE" report demo.trace -o regular.txt 2>report.err
expect_match "-o a regular file: replaced by the report" 'demo_leak: exited 0' regular.txt

mknod full c 1 7 || fail "cannot make a device node in $WORK"
"$MEMSLOPE" report demo.trace -o full 2>full.err
expect_eq "-o a full device: exit" 1 "$?"
expect_match "... says why" 'cannot write full: No space left on device' full.err
expect_eq "... once" 1 "$(grep -c 'No space left' full.err)"
expect_eq "no temporary file left behind" "" "$(ls -a | grep '\.tmp$')"
finish
