#!/bin/sh
# Names with control characters (issue 19): a source file whose name holds
# an ESC sequence and a case name with ESC and a newline. The text report,
# gate and diff write them escaped (\x1b, \x0a): no raw control character
# reaches the terminal, and no line of the report is forged.
. "$(dirname "$0")/lib.sh"
need_memslope
command -v cc >/dev/null 2>&1 || skip "no C compiler to build the program with odd names"
cd "$WORK" || fail "cannot enter $WORK"

source_name=$(printf 'esc\033[31mred.c')
cat >"$source_name" <<'C'
#include <stdlib.h>
#include "memslope.h"
void *volatile sink;
void lose(void) { sink = malloc(40); sink = 0; }
int main(void)
{
    MEMSLOPE_CASE_BEGIN("case\033]0;title\007\033[2J\nforged line");
    for (int i = 0; i < 5; i++) {
        MEMSLOPE_ITERATION();
        lose();
    }
    MEMSLOPE_CASE_END();
    return 0;
}
C
cc -g -O0 -I"$(dirname "$MEMSLOPE")/../include" -o odd "$source_name" || fail "cannot build the program"
record odd.trace -- ./odd
expect_eq "record: exit" 0 "$REC_RC"

# no_controls WHAT FILE: no byte of FILE is a control character but newline.
no_controls() {
    expect_eq "$1: no raw control character" 0 "$(tr -d '\n' <"$2" | tr -d '[:print:]' | tr -d '\200-\377' | wc -c)"
}

"$MEMSLOPE" report odd.trace >report.txt 2>report.err
expect_eq "report: exit" 0 "$?"
no_controls "report" report.txt
expect_match "report: the file name escaped" 'lose \(esc\\x1b\[31mred\.c:4\)' report.txt
expect_match "report: the case name escaped, on one line" \
    '^case\\x1b\]0;title\\x07\\x1b\[2J\\x0aforged line: 5 iterations' report.txt
expect_no_match "report: no forged line" '^forged line' report.txt

"$MEMSLOPE" gate odd.trace --max-leaked 0 >gate.txt 2>&1
expect_eq "gate: exit" 1 "$?"
no_controls "gate" gate.txt
expect_match "gate: the case and the site escaped" \
    "FAIL case 'case\\\\x1b.*forged line': leaked 200 B > limit 0 B; top site lose \\(esc\\\\x1b\\[31mred\\.c:4\\)" gate.txt

"$MEMSLOPE" diff odd.trace odd.trace >diff.txt 2>&1
expect_eq "diff: exit" 0 "$?"
no_controls "diff" diff.txt
expect_match "diff: the case escaped" '^Case case\\x1b.*forged line: 5 iterations' diff.txt
finish
