#!/bin/sh
# A free-threaded CPython (3.13t) has the version of the default build and
# another object layout: the shim must not read its frames at the default
# build's offsets. It knows one by the symbol only such a build exports,
# _Py_DecRefShared. No 3.13t here: a library defining that symbol, preloaded
# into a default interpreter (memslope keeps the user's LD_PRELOAD after its
# shim), stands for one. The trace then says the frames were not read, and
# why; without the library they are.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
printf 'void _Py_DecRefShared(void *object) { (void)object; }\n' >"$WORK/marker.c"
cc -shared -fPIC -o "$WORK/libmarker.so" "$WORK/marker.c" || fail "cannot build the marker library"
SCRIPT='keep = [str(i) * 3 for i in range(100)]'

record "$WORK/default.trace" -- "$PY" -c "$SCRIPT"
expect_eq "default build: record exit" 0 "$REC_RC"
report_json "$WORK/default.trace" "$WORK/default.json"
expect_eq "default build: frames read" true "$(jget "$WORK/default.json" 'd["processes"][0]["python"]["frames"]')"

LD_PRELOAD=$WORK/libmarker.so record "$WORK/ft.trace" -- "$PY" -c "$SCRIPT"
expect_eq "free-threaded: record exit" 0 "$REC_RC"
report_json "$WORK/ft.trace" "$WORK/ft.json"
expect_eq "free-threaded: frames not read" false "$(jget "$WORK/ft.json" 'd["processes"][0]["python"]["frames"]')"
expect_eq "free-threaded: the trace says why" 1 \
    "$(jget "$WORK/ft.json" 'sum("not a free-threaded build" in w for w in d["processes"][0]["warnings"])')"
finish
