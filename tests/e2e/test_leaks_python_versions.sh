#!/bin/sh
# A Python program without a leak loses nothing on every CPython 3.6+
# found (cpython_interpreters): the scan's CPython rules (docs/leakscan.md,
# "Python objects") know each version's GC header (32 bytes before 3.8,
# 16 after) and managed dicts, so the interpreter's own objects, reached
# through pointers past those headers, are not possibly lost. Without the
# default suppressions: the categories as the scan gave them.
. "$(dirname "$0")/lib.sh"
need_memslope
need_python
checked=0
for py in $(cpython_interpreters); do
    version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    record "$WORK/i.trace" -- "$py" -c 'import json, email.parser, decimal, collections'
    expect_eq "Python $version: record exit" 0 "$REC_RC"
    report_json "$WORK/i.trace" "$WORK/i.json" --no-default-suppressions
    expect_eq "Python $version: definitely, indirectly and possibly lost blocks" "0 0 0" \
        "$(jget "$WORK/i.json" '"%d %d %d" % tuple(d["leaks_at_exit"][k]["blocks"] for k in ("definitely_lost", "indirectly_lost", "possibly_lost"))')"
    checked=$((checked + 1))
done
[ $checked -gt 0 ] || skip "no CPython 3.6+ here (make deps installs python3)"
finish
