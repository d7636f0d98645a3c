#!/bin/sh
# The shim reads CPython's frames and code objects at offsets it keeps per
# version (preload/python_layout.h). Every interpreter 3.6+ whose headers
# this machine has (the system one from python3-dev, and others on PATH or
# under ~/.pyenv) builds tests/e2e/python/check_layout.c against its own
# headers (3.11+: the internal ones), which compares every offset with
# offsetof().
. "$(dirname "$0")/lib.sh"
checked=0
for py in $(cpython_interpreters); do
    include=$("$py" -c 'import sysconfig; print(sysconfig.get_paths()["include"])' 2>/dev/null) || continue
    [ -f "$include/internal/pycore_frame.h" ] || [ -f "$include/frameobject.h" ] || continue
    version=$("$py" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
    log "\$ $py: check_layout.c against $include"
    cc -w -I"$include" -I"$include/internal" -o "$WORK/check_layout" "$(dirname "$SRC_FIXTURES")/tests/e2e/python/check_layout.c" ||
        fail "cannot build the layout check against $include"
    out=$("$WORK/check_layout")
    rc=$?
    log "$out"
    case $rc in
        0) checked=$((checked + 1)) ;;
        2) log "  (memslope reads no frames of Python $version: it says so in its traces)" ;;
        *) _mismatch "Python $version ($py): the shim's layout differs from the interpreter's headers" ;;
    esac
done
[ $checked -gt 0 ] || skip "no CPython 3.6+ with its headers here (make deps installs python3-dev)"
finish
