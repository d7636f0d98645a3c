#!/bin/sh
# Python code called from the interpreter's C code (type_call running
# __init__, map() running a function): the stack of what it allocates goes
# from one Python frame to the next with no interpreter frame between them,
# as py-spy and pystack show it, and keeps the interpreter's frames before
# the first Python frame (what allocated) and after the last. On every
# CPython 3.6+ found (cpython_interpreters): before 3.11 each evaluation
# runs one PyFrameObject, read through f_lasti and the older line tables,
# and code objects have no qualified name (Holder.__init__ is __init__).
. "$(dirname "$0")/lib.sh"
need_memslope
need_python

SCRIPT=$SRC_FIXTURES/python/called_from_c.py
MAKE_LINE=$(fixture_line python/called_from_c.py MAKE_LINE)
INIT_LINE=$(fixture_line python/called_from_c.py INIT_LINE)
checked=0
for py in $(cpython_interpreters); do
    version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    log "== Python $version ($py)"
    record "$WORK/g.trace" -- "$py" "$SCRIPT" 3
    expect_eq "Python $version: record exit" 0 "$REC_RC"
    report_json "$WORK/g.trace" "$WORK/g.json" --metric allocated

    # The sites of make()'s bytearray buffers (20,000 bytes and more; the
    # objects and the ints are sites of their own). 3.12 and 3.13 specialise
    # the calls after the first ones, which gives the same Python frames other
    # native frames before them: one site to three. Each site's frames as
    # before|python|after: the frames before make, the Python frames from make
    # to <module> (<listcomp> before 3.12, a frame of its own there, left out),
    # what is between them that is not Python, and how many frames follow
    # <module>. 3.13's shim frame between <module> and __init__ (code named
    # __init__ on no line, which the interpreter makes) must not be there.
    "$PY" - "$WORK/g.json" >"$WORK/sites.txt" <<'PYEOF'
import json, sys
d = json.load(open(sys.argv[1]))
left_out = ("<listcomp>",)
sites = [s for s in d["cases"][0]["sites"]
         if any(f["function"] == "make" for f in s["frames"]) and s["allocated_bytes"] >= 20000 * s["allocations"]]
print("allocations", sum(s["allocations"] for s in sites))
for s in sites:
    frames = s["frames"]
    names = [f["function"] for f in frames]
    first, last = names.index("make"), names.index("<module>")
    python = [f["function"] + (":%d" % f["line"] if f["function"] != "<module>" else "")
              for f in frames[first:last + 1] if f.get("python") and f["function"] not in left_out]
    between = [f["function"] for f in frames[first:last + 1] if not f.get("python")]
    native_before = first > 0 and not any(f.get("python") for f in frames[:first])
    native_after = len(frames) - last - 1 if not any(f.get("python") for f in frames[last + 1:]) else -1
    print("site", " ".join(python), "| between:", ",".join(between) or "-",
          "| before:", "native" if native_before else "other", "| after:", "native" if native_after > 3 else native_after)
PYEOF
    log "$(cat "$WORK/sites.txt")"
    case $version in 3.[6-9]|3.10) init=__init__ ;; *) init=Holder.__init__ ;; esac
    expect_eq "Python $version: make's 150 bytearrays" "allocations 150" "$(head -n 1 "$WORK/sites.txt")"
    expect_eq "Python $version: each site: its Python frames, nothing between them, the interpreter's before and after" \
        "site make:$MAKE_LINE $init:$INIT_LINE <module> | between: - | before: native | after: native" \
        "$(tail -n +2 "$WORK/sites.txt" | sort -u)"
    checked=$((checked + 1))
done
[ $checked -gt 0 ] || skip "no CPython 3.6+ here (make deps installs python3)"
finish
