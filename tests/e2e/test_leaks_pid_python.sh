#!/bin/sh
# memslope leaks PID on a CPython process (PYTHONMALLOC=malloc, so that its
# objects are glibc's blocks): no shim says CPython runs, so the scan finds
# the version in the process's mappings (python3.N, libpython3.N) and
# applies the python heuristic (docs/leakscan.md, "Python objects"). Four
# standard modules imported, nothing leaked: no block lost, and fewer than 1%
# possibly lost (memcheck's rules alone: 18,832 of 34,340 blocks on Debian's
# 3.11.2; with the heuristic 15, the largest two ld.so's, its
# _dl_find_object segments: docs/user-guide.md, "Suppressions").
. "$(dirname "$0")/lib.sh"
need_memslope
need_python

mkfifo "$WORK/in"
PYTHONMALLOC=malloc "$PY" -c 'import json, email.parser, decimal, collections, os, sys
print("pid", os.getpid(), flush=True)
sys.stdin.read()' <"$WORK/in" >"$WORK/pid" 2>"$WORK/err" &
CHILD=$!
exec 3>"$WORK/in"
expect_eq "the interpreter printed its pid" "$CHILD" "$(await_pid "$WORK/pid")"
log "\$ memslope leaks --format json $CHILD"
timeout -k 5 60 "$MEMSLOPE" leaks --format json "$CHILD" >"$WORK/leaks.json" 2>"$WORK/leaks.err"
expect_eq "memslope leaks exit status (0: nothing definitely or indirectly lost)" 0 "$?"
echo >&3
exec 3>&-
wait "$CHILD"
expect_eq "the interpreter's exit status after the scan" 0 "$?"

figures=$(jget "$WORK/leaks.json" '" ".join("%s %d" % (k, d["leaks"][k]["blocks"]) for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))')
log "figures: $figures"
expect_eq "nothing lost" "0 0" "$(jget "$WORK/leaks.json" '"%d %d" % (d["leaks"]["definitely_lost"]["blocks"], d["leaks"]["indirectly_lost"]["blocks"])')"
expect_eq "fewer than 1% of the blocks possibly lost" true \
    "$(jget "$WORK/leaks.json" 'd["leaks"]["possibly_lost"]["blocks"] * 100 < sum(d["leaks"][k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost", "still_reachable"))')"
finish
