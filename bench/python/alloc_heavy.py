"""An allocation-heavy pure-Python workload for bench/python_bench.py:
records parsed from text, grouped into dicts, sorted and summarised, so
the interpreter allocates and frees tuples, lists, dicts, strings and ints
at the rate real data-processing code does. Prints a checksum that must not
change under memslope.

usage: alloc_heavy.py [ROUNDS]
"""
import sys


def parse(lines):
    records = []
    for line in lines:
        name, group, value = line.split(",")
        records.append((name, group, int(value)))
    return records


def summarise(records):
    groups = {}
    for name, group, value in records:
        groups.setdefault(group, []).append((value, name))
    summary = {}
    for group, items in groups.items():
        items.sort()
        summary[group] = {"count": len(items), "low": items[0], "high": items[-1],
                          "names": "|".join(name for _, name in items[:5])}
    return summary


def main():
    rounds = int(sys.argv[1]) if len(sys.argv) > 1 else 200
    lines = ["item%d,g%d,%d" % (i, i % 37, (i * 7919) % 10007) for i in range(2000)]
    checksum = 0
    for r in range(rounds):
        summary = summarise(parse(lines[r % 7:] + lines[:r % 7]))
        checksum = (checksum * 31 + sum(s["count"] * s["high"][0] for s in summary.values())) % 1000000007
    print("checksum %d" % checksum)


if __name__ == "__main__":
    main()
