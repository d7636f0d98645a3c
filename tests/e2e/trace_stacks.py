"""trace_stacks.py TRACE: every stack of every process image in the trace,
one a line (tests/e2e/lib.sh: trace_stacks):
"PROCESS_ID<TAB>EXE<TAB>module:function;module:function..." innermost first,
allocator frames left out. Reads the file as docs/trace-format.md describes it."""
import struct, sys
data = open(sys.argv[1], "rb").read()
if data[:8] != b"MEMSLOPE":
    sys.exit("not a memslope trace: " + sys.argv[1])
strings, modules, frames, exes, stacks = {0: ""}, {}, {}, {}, []
pos = 16
while pos + 16 <= len(data):
    kind, _, length = struct.unpack_from("<IIQ", data, pos)
    p, o = data[pos + 16:pos + 16 + length], 0
    pos += 16 + length + 4
    def take(fmt):
        global o
        values = struct.unpack_from("<" + fmt, p, o)
        o += struct.calcsize("<" + fmt)
        return values
    if kind == 1:
        first, count = take("II")
        for i in range(count):
            (n,) = take("I")
            strings[first + i] = p[o:o + n].decode("utf-8", "replace")
            o += n
    elif kind == 3:
        module_id, path, _ = take("III")
        modules[module_id] = strings[path].rsplit("/", 1)[-1]
    elif kind == 4:
        first, count = take("II")
        for i in range(count):
            module_id, function, _, _, _, _, flags = take("IIIIQQI")
            frames[first + i] = (modules.get(module_id, "?"), strings[function], flags)
    elif kind == 5:
        process_id, _, _, exe = take("IIII")
        exes[process_id] = strings[exe].rsplit("/", 1)[-1]
    elif kind == 6:
        process_id, count = take("II")
        for i in range(count):
            _, depth = take("II")
            ids = take("I" * depth)
            stacks.append((process_id, [frames[f] for f in ids]))
    elif kind == 16:  # STACKS_SHARED: the outermost `shared` ids are the previous stack's
        process_id, count = take("II")
        previous = ()
        for i in range(count):
            _, depth, shared = take("III")
            ids = take("I" * (depth - shared)) + (previous[len(previous) - shared:] if shared else ())
            previous = ids
            stacks.append((process_id, [frames[f] for f in ids]))
for process_id, stack in stacks:
    print("%d\t%s\t%s" % (process_id, exes.get(process_id, "?"),
                          ";".join("%s:%s" % (m, f) for m, f, flags in stack if not flags & 2)))
