"""vg_figures.py LOG: "allocs frees bytes def_bytes def_blocks ind_bytes
ind_blocks pos_bytes pos_blocks reach_bytes reach_blocks" from one memcheck
log (tests/e2e/lib.sh: vg_figures)."""
import re, sys
t = open(sys.argv[1]).read()
def num(s): return int(s.replace(",", ""))
m = re.search(r"total heap usage: ([\d,]+) allocs, ([\d,]+) frees, ([\d,]+) bytes allocated", t)
if not m:
    print("valgrind log %s has no 'total heap usage' line" % sys.argv[1], file=sys.stderr)
    sys.exit(1)
out = [num(m.group(i)) for i in (1, 2, 3)]
for kind in ("definitely lost", "indirectly lost", "possibly lost", "still reachable"):
    k = re.search(kind + r": ([\d,]+) bytes in ([\d,]+) blocks", t)
    out += [num(k.group(1)), num(k.group(2))] if k else [0, 0]
print(" ".join(map(str, out)))
