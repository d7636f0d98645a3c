#!/bin/sh
# The shims' unwind rules kept across recordings (docs/internals.md,
# "Unwind rules kept across runs"): the first recording looks every rule
# up in CFI and writes each module's BUILDID-SIZE.rules beside its symbol
# cache file; the second reads them all and looks none up, and its stacks
# are the same; a fork child's lookups are kept too, also for modules its
# parent met before the fork; a program rebuilt at the same path has rules
# of its own; a corrupt file is not used, its rules are looked up again
# and the file written whole; a program that exports a crc32 of its own
# is recorded twice (the shim once called zlib's by name, and crashed in
# the program's); --no-symbol-cache reads and writes none. Every
# recording has --verbose, whose "unwind rules" line says where the rules
# came from: LOOKED_UP counts every lookup of every shim, kept or not.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak fork_child
command -v cc >/dev/null 2>&1 || skip "no C compiler (cc) to build the program this test rebuilds"

XDG_CACHE_HOME=$WORK/cache
export XDG_CACHE_HOME
CACHE=$XDG_CACHE_HOME/memslope/symbols
CFLAGS_FIXTURE="-std=gnu11 -g -O0 -pthread -I$SRC_FIXTURES/../include -D_GNU_SOURCE"
mkdir -p "$WORK/src" "$WORK/bin"

# rules_file BINARY: the path of the binary's kept rules.
rules_file() {
    _id=$(readelf -n "$1" | awk '/Build ID/ {print $3}')
    printf '%s/%s-%x.rules' "$CACHE" "$_id" "$(stat -c %s "$1")"
}

# rec NAME [RECORD-OPTIONS] -- COMMAND...: record --verbose into
# $WORK/NAME.trace, every stack of the report into $WORK/NAME.stacks;
# READ and LOOKED_UP are the rules the shims read from kept files and
# looked up in CFI ("" when the line is missing), WRITTEN the files
# written.
rec() {
    _name=$1
    shift
    record "$WORK/$_name.trace" --verbose "$@"
    expect_eq "$_name: record exit" 0 "$REC_RC"
    cp "$WORK/rec.err" "$WORK/$_name.err"
    "$MEMSLOPE" report "$WORK/$_name.trace" --format collapsed --metric allocated >"$WORK/$_name.stacks" 2>&1 ||
        fail "memslope report $_name failed"
    _line='^memslope: unwind rules: \([0-9]*\) read from the symbol cache, \([0-9]*\) looked up in CFI (\([0-9]*\) of them kept.* \([0-9]*\) files written$'
    READ=$(sed -n "s/$_line/\\1/p" "$WORK/rec.err")
    LOOKED_UP=$(sed -n "s/$_line/\\2/p" "$WORK/rec.err")
    KEPT=$(sed -n "s/$_line/\\3/p" "$WORK/rec.err")
    WRITTEN=$(sed -n "s/$_line/\\4/p" "$WORK/rec.err")
}

log "== the second recording reads every rule the first looked up"
cp "$SRC_FIXTURES/demo_leak.c" "$WORK/src/demo.c"
cc $CFLAGS_FIXTURE -o "$WORK/bin/demo" "$WORK/src/demo.c" || fail "cannot build the demo"
rec cold -- "$WORK/bin/demo"
expect_eq "cold: none read" 0 "$READ"
expect_ne "cold: rules looked up" 0 "${LOOKED_UP:-0}"
expect_eq "cold: every lookup kept" "$LOOKED_UP" "$KEPT"
expect_ne "cold: files written" 0 "${WRITTEN:-0}"
expect_eq "cold: the program's rules kept" yes "$([ -s "$(rules_file "$WORK/bin/demo")" ] && echo yes || echo no)"
rec warm -- "$WORK/bin/demo"
expect_ne "warm: rules read" 0 "${READ:-0}"
expect_eq "warm: none looked up" 0 "$LOOKED_UP"
expect_eq "warm: no file written" 0 "$WRITTEN"
expect_eq "warm: the same stacks as cold" "" "$(diff "$WORK/cold.stacks" "$WORK/warm.stacks")"

log "== a fork child's lookups are kept as well"
rec fork_cold -- "$FIXTURES/fork_child"
expect_ne "fork cold: rules looked up" 0 "${LOOKED_UP:-0}"
rec fork_warm -- "$FIXTURES/fork_child"
expect_eq "fork warm: none looked up, the child's neither" 0 "$LOOKED_UP"
expect_eq "fork warm: the same stacks" "" "$(diff "$WORK/fork_cold.stacks" "$WORK/fork_warm.stacks")"
# The parent records before it forks, so its unwinder has met the modules
# already: the child reports them again in its own region, or its rules
# at new call sites could not be kept.
cat >"$WORK/src/fork_after.c" <<'EOF'
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
static __attribute__((noinline)) void *child_alloc(size_t n) { return malloc(n); }
static __attribute__((noinline)) void *child_alloc_outer(size_t n) { return child_alloc(n); }
static __attribute__((noinline)) void child_side(void)
{
    for (int i = 0; i < 5; i++)
        free(child_alloc_outer(100 + (size_t)i));
}
int main(void)
{
    void *before = malloc(64);
    pid_t pid = fork();
    if (pid == 0) {
        child_side();
        _exit(0);
    }
    waitpid(pid, NULL, 0);
    free(before);
    return 0;
}
EOF
cc $CFLAGS_FIXTURE -o "$WORK/bin/fork_after" "$WORK/src/fork_after.c" || fail "cannot build fork_after"
rec fork_after_cold -- "$WORK/bin/fork_after"
expect_eq "fork after recording: every lookup kept" "$LOOKED_UP" "$KEPT"
rec fork_after_warm -- "$WORK/bin/fork_after"
expect_eq "fork after recording, warm: none looked up, the child's neither" 0 "$LOOKED_UP"
expect_eq "fork after recording: the same stacks" "" \
    "$(diff "$WORK/fork_after_cold.stacks" "$WORK/fork_after_warm.stacks")"

log "== a program with a crc32 of its own"
cat >"$WORK/src/own_crc32.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
unsigned crc32(const char *text) /* exported (-rdynamic), found before zlib's */
{
    unsigned h = 0;
    while (*text)
        h = h * 31 + (unsigned char)*text++;
    return h;
}
int main(int argc, char **argv)
{
    void *p = malloc(100);
    printf("%u\n", crc32(argc > 0 ? argv[0] : "x"));
    free(p);
    return 0;
}
EOF
cc $CFLAGS_FIXTURE -rdynamic -o "$WORK/bin/own_crc32" "$WORK/src/own_crc32.c" || fail "cannot build own_crc32"
rec own_crc32_cold -- "$WORK/bin/own_crc32"
rec own_crc32_warm -- "$WORK/bin/own_crc32"
expect_ne "own crc32, warm: its rules read" 0 "${READ:-0}"
expect_eq "own crc32, warm: none looked up" 0 "$LOOKED_UP"

log "== rebuilt at the same path: its own rules"
{ echo "static int padding_function(int x) { return x * 3; }"; cat "$SRC_FIXTURES/demo_leak.c"; } >"$WORK/src/demo.c"
cc $CFLAGS_FIXTURE -o "$WORK/bin/demo" "$WORK/src/demo.c" || fail "cannot rebuild the demo"
rec rebuilt -- "$WORK/bin/demo"
expect_ne "rebuilt: the program's rules looked up" 0 "${LOOKED_UP:-0}"
expect_ne "rebuilt: libc's still read" 0 "${READ:-0}"
expect_eq "rebuilt: the stacks of the first build" "" "$(diff "$WORK/cold.stacks" "$WORK/rebuilt.stacks")"

log "== a corrupt file: not used, looked up again, written whole"
F=$(rules_file "$WORK/bin/demo")
[ -s "$F" ] || fail "no rules file $F for the rebuilt demo"
printf '\001\002\003\004' | dd of="$F" bs=1 seek=70 conv=notrunc 2>/dev/null
rec corrupt -- "$WORK/bin/demo"
expect_ne "corrupt: the program's rules looked up again" 0 "${LOOKED_UP:-0}"
expect_eq "corrupt: the same stacks" "" "$(diff "$WORK/cold.stacks" "$WORK/corrupt.stacks")"
rec mended -- "$WORK/bin/demo"
expect_eq "mended: none looked up" 0 "$LOOKED_UP"
: >"$F" # cut to nothing
rec empty -- "$WORK/bin/demo"
expect_ne "an empty file: looked up again" 0 "${LOOKED_UP:-0}"
expect_eq "an empty file: the same stacks" "" "$(diff "$WORK/cold.stacks" "$WORK/empty.stacks")"

log "== --no-symbol-cache: nothing read, nothing written"
before=$(ls -l --time-style=+%s.%N "$CACHE" | md5sum)
rec uncached --no-symbol-cache -- "$WORK/bin/demo"
expect_eq "uncached: no unwind rules line" "" "$READ$LOOKED_UP"
expect_eq "uncached: the folder untouched" "$before" "$(ls -l --time-style=+%s.%N "$CACHE" | md5sum)"
expect_eq "uncached: the same stacks" "" "$(diff "$WORK/cold.stacks" "$WORK/uncached.stacks")"

finish
