#!/bin/sh
# A Python C extension imported by a loop (fixtures/python): growth per
# iteration equals the extension's leak (64 B), attributed to its function
# and line, both with the Python marker module and with --iteration on the
# extension's C function (a library loaded by dlopen after start). A case
# without iterations is told how to mark them in Python.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
build_leaky_ext "$PY" "$WORK" || skip "Python.h not found for $PY (make deps installs python3-dev)"
leak_line=$(fixture_line python/leaky_ext.c LEAK_LINE)
export PYTHONPATH="$WORK:$(dirname "$MEMSLOPE")/../lib/memslope/python"

check_growth() { # JSON CASE-EXPR LABEL
    expect_eq "$3: growth per iteration" 64 "$(jget "$1" "$2[\"growth\"][\"bytes_per_iteration\"]")"
    expect_eq "$3: top site" "leaky_leak:$leak_line" \
        "$(jget "$1" "'%s:%s' % ($2['sites'][0]['frames'][0]['function'], $2['sites'][0]['frames'][0]['line'])")"
    expect_eq "$3: top site growth" 64 "$(jget "$1" "$2[\"sites\"][0][\"growth_bytes_per_iteration\"]")"
}

record "$WORK/m.trace" -- "$PY" "$WORK/drive_leaky.py" markers 100
expect_eq "markers: record exit" 0 "$REC_RC"
report_json "$WORK/m.trace" "$WORK/m.json"
expect_eq "markers: case" "ext 100" "$(jget "$WORK/m.json" '"%s %d" % ([c for c in d["cases"] if c["name"]=="ext"][0]["name"], [c for c in d["cases"] if c["name"]=="ext"][0]["iterations"])')"
check_growth "$WORK/m.json" '[c for c in d["cases"] if c["name"]=="ext"][0]' markers

record "$WORK/i.trace" --iteration leaky_leak -- "$PY" "$WORK/drive_leaky.py" plain 100
expect_eq "--iteration: record exit" 0 "$REC_RC"
report_json "$WORK/i.trace" "$WORK/i.json"
expect_eq "--iteration: iterations" 100 "$(jget "$WORK/i.json" 'd["cases"][0]["iterations"]')"
check_growth "$WORK/i.json" 'd["cases"][0]' --iteration

# A case without iterations: the text says how to mark them in Python.
printf 'import memslope\nwith memslope.case("once"):\n    kept = [bytes(100) for _ in range(10)]\n' >"$WORK/once.py"
record "$WORK/o.trace" -- "$PY" "$WORK/once.py"
"$MEMSLOPE" report "$WORK/o.trace" >"$WORK/o.txt" 2>&1
expect_match "no iterations: the text names the Python marker and py:FUNCTION" \
    "memslope.iteration\(\) in the Python code, or record --iteration py:FUNCTION" "$WORK/o.txt"
expect_no_match "no iterations: ... not the C marker" "memslope_iteration\(\)" "$WORK/o.txt"
finish
