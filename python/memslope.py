"""memslope markers for Python benchmarks.

Delimits benchmark cases and iterations for ``memslope record``, which
preloads ``libmemslope.so`` into the process; the markers are the functions
that library exports, looked up in the running process through ctypes.
Without memslope (the library is not loaded) every call is a no-op, so a
benchmark can keep its markers in place.

    import memslope

    with memslope.case("parse"):
        for _ in range(200):
            memslope.iteration()
            parse(data)

Semantics (the same as the C macros in memslope.h):

- an iteration outside any case belongs to the whole-process case;
- beginning a case while one is open ends the open one (cases do not nest);
- ending a case when none is open is ignored.

Installation: the module is installed at ``PREFIX/lib/memslope/python``
(``/usr/local/lib/memslope/python`` by default; ``build/lib/memslope/python``
in a build tree). Put that directory on the module path, e.g.::

    PYTHONPATH=/usr/local/lib/memslope/python memslope record -- python3 bench.py

or copy ``memslope.py`` next to the benchmark.
"""

import contextlib

__all__ = ["available", "case", "case_begin", "case_end", "iteration"]


def _lookup():
    # A recorded CPython has the markers built in (the shim registers the
    # module _memslope before the interpreter starts): no ctypes, so none of
    # ctypes' own allocations appear in the recording.
    try:
        import _memslope
    except ImportError:
        pass
    else:
        return _memslope.case_begin, _memslope.iteration, _memslope.case_end
    try:
        import ctypes
    except ImportError:
        return None, None, None
    try:
        process = ctypes.CDLL(None)
    except OSError:
        return None, None, None
    try:
        begin = process.memslope_case_begin
        iteration_fn = process.memslope_iteration
        end = process.memslope_case_end
    except AttributeError:
        return None, None, None
    begin.argtypes = [ctypes.c_char_p]
    begin.restype = None
    iteration_fn.argtypes = []
    iteration_fn.restype = None
    end.argtypes = []
    end.restype = None
    return begin, iteration_fn, end


_case_begin, _iteration, _case_end = _lookup()


def available():
    """True when the process is preloaded with libmemslope.so."""
    return _case_begin is not None


def case_begin(name):
    """Begin the case `name` (a str or bytes); ends any open case first."""
    if _case_begin is None:
        return
    if isinstance(name, str):
        name = name.encode("utf-8", "replace")
    _case_begin(bytes(name))


def case_end():
    """End the open case; ignored when no case is open."""
    if _case_end is not None:
        _case_end()


def iteration():
    """Mark an iteration boundary (the start of the next iteration)."""
    if _iteration is not None:
        _iteration()


@contextlib.contextmanager
def case(name):
    """Context manager: ``with memslope.case("name"):`` begins and ends a case."""
    case_begin(name)
    try:
        yield
    finally:
        case_end()
