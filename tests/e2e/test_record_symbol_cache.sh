#!/bin/sh
# The symbol cache across recordings (docs/internals.md, "Symbols cached
# across runs"): a second recording reads its frames from the cache and no
# DWARF, with the same report; a program rebuilt at the same path with a
# line moved, and a separate debug file replaced under an unchanged binary,
# give the new line; a corrupt or cut cache file is ignored and written
# again; two recordings that end at once both add their frames; the cache
# is left alone with --no-symbol-cache, and a folder others may write to
# is not used. Every recording here has --verbose, whose lines say where
# the frames came from.
. "$(dirname "$0")/lib.sh"
need_memslope
need_fixture demo_leak
command -v cc >/dev/null 2>&1 || skip "no C compiler (cc) to build the programs this test rebuilds"
command -v objcopy >/dev/null 2>&1 || skip "objcopy (binutils) is not installed"

XDG_CACHE_HOME=$WORK/cache
export XDG_CACHE_HOME
CACHE=$XDG_CACHE_HOME/memslope/symbols
CFLAGS_FIXTURE="-std=gnu11 -g -O0 -pthread -I$SRC_FIXTURES/../include -D_GNU_SOURCE"
LEAK=$(fixture_line demo_leak.c DEMO-LEAK)
mkdir -p "$WORK/src" "$WORK/bin"

# build NAME SOURCE [CC-OPTIONS]: $WORK/bin/NAME from SOURCE.
build() {
    _name=$1 _source=$2
    shift 2
    cc $CFLAGS_FIXTURE "$@" -o "$WORK/bin/$_name" "$_source" -ldl || fail "cannot build $_source"
}

# cache_file BINARY: the path of the binary's file in the cache.
cache_file() {
    _id=$(readelf -n "$1" | awk '/Build ID/ {print $3}')
    printf '%s/%s-%x.sym' "$CACHE" "$_id" "$(stat -c %s "$1")"
}

# rec NAME COMMAND...: record --verbose into $WORK/NAME.trace, the text
# report into $WORK/NAME.txt; FROM_CACHE and FROM_DEBUG_INFO are the
# frames each gave, REJECTED the cache files refused.
rec() {
    _name=$1
    shift
    record "$WORK/$_name.trace" --verbose -- "$@"
    expect_eq "$_name: record exit" 0 "$REC_RC"
    cp "$WORK/rec.err" "$WORK/$_name.err"
    "$MEMSLOPE" report "$WORK/$_name.trace" >"$WORK/$_name.txt" 2>&1 || fail "memslope report $_name failed"
    FROM_CACHE=$(sed -n 's/^memslope: symbols: \([0-9]*\) frames from the symbol cache.*/\1/p' "$WORK/rec.err")
    FROM_DEBUG_INFO=$(sed -n 's/^memslope: symbols: .* \([0-9]*\) read from debug info.*/\1/p' "$WORK/rec.err")
    REJECTED=$(sed -n 's/^memslope: symbol cache .* \([0-9]*\) rejected.*/\1/p' "$WORK/rec.err")
}

# The leak's frame in a text report: "at leaky_site (FILE:LINE)".
leak_frame() {
    grep -m 1 -oE 'at leaky_site \([^)]*\)' "$1" | sed 's/.*(\(.*\))/\1/; s|.*/||'
}

log "== the second recording reads every frame from the cache"
cp "$SRC_FIXTURES/demo_leak.c" "$WORK/src/demo.c"
build demo "$WORK/src/demo.c"
rec cold "$WORK/bin/demo"
expect_eq "cold: no frame from the cache" 0 "$FROM_CACHE"
expect_ne "cold: frames read from debug info" 0 "${FROM_DEBUG_INFO:-0}"
expect_eq "cold: the leak's line" "demo.c:$LEAK" "$(leak_frame "$WORK/cold.txt")"
expect_eq "cold: the program's cache file written" yes "$([ -f "$(cache_file "$WORK/bin/demo")" ] && echo yes || echo no)"
expect_eq "cold: the folder is the user's alone" 700 "$(stat -c %a "$CACHE")"
cold_frames=$FROM_DEBUG_INFO
rec warm "$WORK/bin/demo"
expect_eq "warm: every frame from the cache" "$cold_frames" "$FROM_CACHE"
expect_eq "warm: none read from debug info" 0 "$FROM_DEBUG_INFO"
expect_match "warm: no DWARF loaded" 'modules whose DWARF was loaded: 0,' "$WORK/warm.err"
expect_eq "warm: the same report as cold" "" "$(diff "$WORK/cold.txt" "$WORK/warm.txt")"

log "== rebuilt at the same path with every line one further down"
{ echo "/* one line more */"; cat "$SRC_FIXTURES/demo_leak.c"; } >"$WORK/src/demo.c"
build demo "$WORK/src/demo.c"
rec rebuilt "$WORK/bin/demo"
expect_ne "rebuilt: the program's frames read from debug info" 0 "${FROM_DEBUG_INFO:-0}"
expect_eq "rebuilt: the new line" "demo.c:$((LEAK + 1))" "$(leak_frame "$WORK/rebuilt.txt")"
"$PY" -c 'import re, sys; print(re.sub(r"demo\.c:(\d+)", lambda m: "demo.c:%d" % (int(m[1]) + 1), open(sys.argv[1]).read()), end="")' \
    "$WORK/cold.txt" >"$WORK/cold-shifted.txt"
expect_eq "rebuilt: the cold report with every demo.c line one further down" "" \
    "$(diff "$WORK/cold-shifted.txt" "$WORK/rebuilt.txt")"

log "== a separate debug file replaced under the same stripped binary (same build-id)"
# Both builds give the same code and the same build-id; only their debug
# files differ, by the line of everything.
ID=0x5eed5eed5eed5eed5eed5eed5eed5eed5eed5eed
cp "$SRC_FIXTURES/demo_leak.c" "$WORK/src/split1.c"
{ echo "/* one line more */"; cat "$SRC_FIXTURES/demo_leak.c"; } >"$WORK/src/split2.c"
for v in 1 2; do
    cp "$WORK/src/split$v.c" "$WORK/src/split.c" # the same file name in both debug files
    build "full$v" "$WORK/src/split.c" -Wl,--build-id=$ID
    objcopy --only-keep-debug "$WORK/bin/full$v" "$WORK/bin/split.debug$v"
    objcopy --strip-debug "$WORK/bin/full$v" "$WORK/bin/stripped$v"
done
expect_eq "the two stripped builds are the same bytes" "" "$(cmp "$WORK/bin/stripped1" "$WORK/bin/stripped2" 2>&1)"
cp "$WORK/bin/split.debug1" "$WORK/bin/split.debug"
objcopy --add-gnu-debuglink="$WORK/bin/split.debug" "$WORK/bin/stripped1" "$WORK/bin/split"
rec split1 "$WORK/bin/split"
expect_eq "debug file 1: the line" "split.c:$LEAK" "$(leak_frame "$WORK/split1.txt")"
rec split1again "$WORK/bin/split"
expect_eq "debug file 1 again: none read from debug info" 0 "$FROM_DEBUG_INFO"
cp "$WORK/bin/split.debug2" "$WORK/bin/split.debug.new"
mv "$WORK/bin/split.debug.new" "$WORK/bin/split.debug"
rec split2 "$WORK/bin/split"
expect_eq "debug file 2: the stale cache file rejected" 1 "$REJECTED"
expect_eq "debug file 2: the new line" "split.c:$((LEAK + 1))" "$(leak_frame "$WORK/split2.txt")"

log "== a corrupt cache file: ignored, the right lines, written again"
cp "$SRC_FIXTURES/demo_leak.c" "$WORK/src/demo.c"
build demo "$WORK/src/demo.c"
rec before_corruption "$WORK/bin/demo"
F=$(cache_file "$WORK/bin/demo")
[ -f "$F" ] || fail "no cache file $F for the demo"
printf '\377\377\377\377' | dd of="$F" bs=1 seek=120 conv=notrunc 2>/dev/null
cp "$F" "$WORK/corrupt.sym"
rec corrupt "$WORK/bin/demo"
expect_eq "corrupt: the file rejected" 1 "$REJECTED"
expect_eq "corrupt: the leak's line" "demo.c:$LEAK" "$(leak_frame "$WORK/corrupt.txt")"
expect_eq "corrupt: the same report as cold" "" "$(diff "$WORK/cold.txt" "$WORK/corrupt.txt")"
expect_eq "corrupt: the file written again" differ "$(cmp -s "$F" "$WORK/corrupt.sym" && echo same || echo differ)"
rec repaired "$WORK/bin/demo"
expect_eq "repaired: nothing rejected" 0 "$REJECTED"
expect_eq "repaired: none read from debug info" 0 "$FROM_DEBUG_INFO"
truncate -s 60 "$F"
rec cut "$WORK/bin/demo"
expect_eq "cut: the file rejected" 1 "$REJECTED"
expect_eq "cut: the leak's line" "demo.c:$LEAK" "$(leak_frame "$WORK/cut.txt")"
rec cut_repaired "$WORK/bin/demo"
expect_eq "cut, then: none read from debug info" 0 "$FROM_DEBUG_INFO"

log "== two recordings that end at once: both add their frames to libc's file"
# Each allocates through libc functions of its own (getline's, strdup's and
# fopen's), so libc's cache file must hold the union of both.
cat >"$WORK/src/reader.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>
int main(void)
{
    char *line = NULL;
    size_t size = 0;
    FILE *input = fmemopen("a line\n", 7, "r");
    if (!input || getline(&line, &size, input) < 0)
        return 1;
    usleep(300000);
    free(line);
    fclose(input);
    return 0;
}
EOF
cat >"$WORK/src/copier.c" <<'EOF'
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
    char *copy = strdup("a text");
    FILE *file = fopen("/dev/null", "r");
    usleep(300000);
    if (file)
        fclose(file);
    free(copy);
    return 0;
}
EOF
build reader "$WORK/src/reader.c"
build copier "$WORK/src/copier.c"
for round in 1 2 3; do
    rm -rf "$XDG_CACHE_HOME"
    timeout -k 5 "$RECORD_TIMEOUT" "$MEMSLOPE" record --quiet -o "$WORK/r.trace" -- "$WORK/bin/reader" 2>"$WORK/r.err" &
    first=$!
    timeout -k 5 "$RECORD_TIMEOUT" "$MEMSLOPE" record --quiet -o "$WORK/c.trace" -- "$WORK/bin/copier" 2>"$WORK/c.err"
    expect_eq "round $round: the copier's recording" 0 "$?"
    wait $first
    expect_eq "round $round: the reader's recording" 0 "$?"
    expect_eq "round $round: no warning" "" "$(cat "$WORK/r.err" "$WORK/c.err")"
    rec "reader$round" "$WORK/bin/reader"
    expect_eq "round $round: reader again: none read from debug info" 0 "$FROM_DEBUG_INFO"
    rec "copier$round" "$WORK/bin/copier"
    expect_eq "round $round: copier again: none read from debug info" 0 "$FROM_DEBUG_INFO"
    expect_eq "round $round: no temporary file left" "" "$(ls -A "$CACHE" | grep '^\.tmp-')"
done
# Frames of libc that only one of the two has, named from the cache.
expect_eq "the copier's strdup frame" 1 "$(trace_stacks "$WORK/copier3.trace" | grep -c 'libc.so.6:__strdup;copier:main')"
expect_eq "the reader's getdelim frame" 2 "$(trace_stacks "$WORK/reader3.trace" | grep -c 'libc.so.6:__getdelim;reader:main')"

log "== --no-symbol-cache: the cache neither read nor written"
XDG_CACHE_HOME=$WORK/untouched
record "$WORK/off.trace" --verbose --no-symbol-cache -- "$WORK/bin/demo"
expect_eq "off: record exit" 0 "$REC_RC"
expect_match "off: says so" 'symbol cache not used \(--no-symbol-cache\)' "$WORK/rec.err"
rm -rf "$WORK/untouched"
record "$WORK/off.trace" --no-symbol-cache -- "$WORK/bin/demo"
expect_eq "off: no cache folder made" no "$([ -e "$WORK/untouched" ] && echo yes || echo no)"
XDG_CACHE_HOME=$WORK/cache
record "$WORK/off.trace" --verbose --no-symbol-cache -- "$WORK/bin/demo"
expect_match "off, with a warm cache: no frame from it" ': 0 frames from the symbol cache' "$WORK/rec.err"

log "== a cache folder others may write to is not used"
XDG_CACHE_HOME=$WORK/shared
mkdir -p "$WORK/shared/memslope/symbols"
chmod 777 "$WORK/shared/memslope/symbols"
rec shared "$WORK/bin/demo"
expect_match "shared: says why" 'symbol cache not used: .*others may write to it' "$WORK/shared.err"
expect_eq "shared: the leak's line" "demo.c:$LEAK" "$(leak_frame "$WORK/shared.txt")"
expect_eq "shared: nothing written there" "" "$(ls -A "$WORK/shared/memslope/symbols")"
finish
