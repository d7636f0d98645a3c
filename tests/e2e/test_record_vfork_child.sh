#!/bin/sh
# A vfork child whose first stop reaches the tracer before its parent's
# vfork event (gcc's under make: three runs in four) was taken for a fork
# child, and the parent's heap was copied into its record: gcc's 173 KiB
# in 111 blocks "live at exit" in an image that allocated nothing. Such a
# child is now told by the memory it shares (kcmp). Three recordings of
# `make` compiling one file: no image replaced by exec holds live bytes it
# never allocated.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
command -v make >/dev/null 2>&1 && command -v gcc >/dev/null 2>&1 || skip "needs make and gcc"

mkdir -p "$WORK/build"
printf 'int main(void) { return 0; }\n' >"$WORK/build/a.c"
printf 'a.o: a.c\n\tgcc -c a.c -o a.o\n' >"$WORK/build/Makefile"
cd "$WORK/build" || fail "cannot enter $WORK/build"
for run in 1 2 3; do
    rm -f a.o
    record "$WORK/make$run.trace" -- make -s
    expect_eq "run $run: exit" 0 "$REC_RC"
    report_json "$WORK/make$run.trace" "$WORK/make$run.json"
    expect_eq "run $run: images that allocated nothing hold nothing" "[]" \
        "$(jget "$WORK/make$run.json" '[(p["pid"], p["exe"], p["live_at_exit"]["bytes"]) for p in d["processes"] if p["totals"]["allocations"] == 0 and p["live_at_exit"] and p["live_at_exit"]["bytes"] > 0]')"
done
finish
