"""jget.py JSON EXPR: the value of a python expression over the report `d`
(tests/e2e/lib.sh: jget): JSON for containers, plain for numbers and
strings; MISSING if a key is absent."""
import json, sys
d = json.load(open(sys.argv[1]))
try:
    v = eval(sys.argv[2], {"d": d, "len": len, "sum": sum, "any": any, "all": all,
                           "sorted": sorted, "isinstance": isinstance})
except (KeyError, IndexError, TypeError) as e:
    print("MISSING")
    sys.exit(0)
if isinstance(v, float) and v.is_integer():
    v = int(v)
if isinstance(v, (dict, list, bool)) or v is None:
    print(json.dumps(v, sort_keys=True))
else:
    print(v)
