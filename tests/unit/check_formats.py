"""Checks of the flame-graph formats that test_formats.c writes from the
sample trace: `python3 tests/unit/check_formats.py CHECK FILE` runs the
function CHECK on FILE and exits non-zero (with a traceback) when an
assertion fails."""
import gzip
import json
import re
import sys


def speedscope(d):
    """The schema's required members and index ranges, and the sample's figures."""
    assert d['$schema'] == 'https://www.speedscope.app/file-format-schema.json'
    assert d['exporter'].startswith('memslope@')
    frames = d['shared']['frames']
    assert all(isinstance(fr['name'], str) for fr in frames)
    for p in d['profiles']:
        assert p['type'] == 'sampled' and p['unit'] in ('bytes', 'none')
        assert len(p['samples']) == len(p['weights']) > 0
        assert all(0 <= i < len(frames) for s in p['samples'] for i in s)
        assert p['startValue'] == 0 and abs(p['endValue'] - sum(p['weights'])) < 1e-9
    assert 0 <= d['activeProfileIndex'] < len(d['profiles'])
    byname = {p['name']: p for p in d['profiles']}
    leak = byname['leaked']
    assert leak['weights'] == [480]
    stack = [frames[i] for i in leak['samples'][0]]
    assert [fr['name'] for fr in stack] == ['main', 'leaky_site'], stack
    assert stack[1]['file'] == 'leak.c' and stack[1]['line'] == 6
    assert byname['allocations']['unit'] == 'none' and sum(byname['allocations']['weights']) == 1000
    assert sum(byname['allocated bytes']['weights']) == 48000


def speedscope_without_growth(path):
    d = json.load(open(path))
    speedscope(d)
    assert [p['name'] for p in d['profiles']] == ['leaked', 'live at peak', 'allocated bytes', 'allocations']
    assert d['activeProfileIndex'] == 0


def speedscope_one_frame_per_function(path):
    d = json.load(open(path))
    frames = d['shared']['frames']
    assert [fr['name'] for fr in frames].count('main') == 1, frames
    main = [fr for fr in frames if fr['name'] == 'main'][0]
    assert main['file'] == 'leak.c' and main['line'] == 12
    p = [p for p in d['profiles'] if p['name'] == 'allocated bytes'][0]
    assert len(set(tuple(s) for s in p['samples'])) == 1 and sum(p['weights']) == 48000


def speedscope_growth_is_active(path):
    d = json.load(open(path))
    speedscope(d)
    p = d['profiles'][d['activeProfileIndex']]
    assert p['name'] == 'growth per iteration' and p['weights'] == [48] and p['unit'] == 'bytes'


class Profile:
    """A gzipped profile.proto read by a protobuf reader just big enough for
    it: fields as (number, value) lists."""

    def __init__(self, path):
        self.top = fields(gzip.open(path).read())
        top = self.top
        self.strings = [v.decode() for k, v in top if k == 6]
        strings = self.strings
        self.types = [strings[one(fields(v), 1)] + '/' + strings[one(fields(v), 2)] for k, v in top if k == 1]
        self.samples = [fields(v) for k, v in top if k == 2]
        self.locations = {one(l, 1): l for l in (fields(v) for k, v in top if k == 4)}
        self.functions = {one(fn, 1): fn for fn in (fields(v) for k, v in top if k == 5)}
        self.mappings = [fields(v) for k, v in top if k == 3]

    def total(self, name):
        col = self.types.index(name)
        return sum(packed(one(s, 2, b''))[col] for s in self.samples)

    def leaf(self, s):
        loc = self.locations[packed(one(s, 1, b''))[0]]
        line = fields(one(loc, 4))
        fn = self.functions[one(line, 1)]
        return self.strings[one(fn, 2)], self.strings[one(fn, 4)], one(line, 2)


def varint(b, i):
    v = s = 0
    while True:
        c = b[i]; i += 1; v |= (c & 0x7f) << s; s += 7
        if c < 0x80: return v, i


def fields(b):
    i, out = 0, []
    while i < len(b):
        key, i = varint(b, i)
        if key & 7 == 0: v, i = varint(b, i)
        elif key & 7 == 2:
            n, i = varint(b, i); v = b[i:i + n]; i += n
        else: raise ValueError('wire type %d' % (key & 7))
        out.append((key >> 3, v))
    return out


def packed(b):
    i, out = 0, []
    while i < len(b):
        v, i = varint(b, i); out.append(v - (1 << 64) if v >= 1 << 63 else v)
    return out


def one(fs, n, default=0): return next((v for k, v in fs if k == n), default)


def pprof_decodes(path):
    p = Profile(path)
    strings, types, top, samples, locations, mappings = p.strings, p.types, p.top, p.samples, p.locations, p.mappings
    assert strings[0] == ''
    assert types == ['alloc_objects/count', 'alloc_space/bytes', 'inuse_objects/count',
                     'inuse_space/bytes', 'leaked_objects/count', 'leaked_space/bytes'], types
    assert p.total('alloc_objects/count') == 1000 and p.total('alloc_space/bytes') == 48000
    assert p.total('inuse_space/bytes') == 480 and p.total('leaked_space/bytes') == 480
    assert strings[one(top, 14)] == 'leaked_space'
    leaks = [s for s in samples if packed(one(s, 2, b''))[types.index('leaked_space/bytes')]]
    assert [p.leaf(s) for s in leaks] == [('leaky_site', 'leak.c', 6)], [p.leaf(s) for s in leaks]
    assert any(strings[one(m, 5)] == '/path/bench' and strings[one(m, 6)] == 'abcdef01' for m in mappings)
    assert all(one(l, 2) in range(0, len(mappings) + 1) for l in locations.values())
    # helper is inlined into the unsymbolized frame: one Location, two Lines, innermost first
    inlined = [l for l in locations.values() if len([v for k, v in l if k == 4]) == 2]
    assert len(inlined) == 1, locations
    assert [strings[one(p.functions[one(fields(v), 1)], 2)] for k, v in inlined[0] if k == 4] == \
        ['helper', '[unknown]']
    assert one(inlined[0], 3) == 0xdeadbeef


def pprof_one_function_per_caller(path):
    p = Profile(path)
    strings, functions, locations = p.strings, p.functions, p.locations
    names = [strings[one(fn, 2)] for fn in functions.values()]
    assert names.count('main') == 1 and names.count('leaky_site') == 1, names
    main = [fn for fn in functions.values() if strings[one(fn, 2)] == 'main'][0]
    assert one(main, 5) == 12
    # the Locations keep the lines each call was made from
    lines = sorted(one(fields(v), 2) for l in locations.values() for k, v in l if k == 4
                   and one(fields(v), 1) == one(main, 1))
    assert lines == [12, 13], lines


def pprof_growth_column(path):
    p = Profile(path)
    assert 'growth/bytes' in p.types
    assert p.total('growth/bytes') == 48
    assert p.strings[one(p.top, 14)] == 'growth'


def html_embeds_data_safely(path):
    page = open(path).read()
    start = page.index('<script type="application/json" id="memslope-data">')
    body = page[start:].split('>', 1)[1].split('</script>', 1)[0]
    d = json.loads(body)
    assert page.startswith('<!DOCTYPE html>')
    assert 'alert(1)</script>' not in page
    names = [fr[0] for fr in d['frames']]
    assert 'leaky_site' in names and '</script><script>alert(1)</script>' in names
    site = [s for s in d['cases'][0]['sites'] if d['frames'][s['stack'][-1]][0] == 'leaky_site'][0]
    assert site['leaked'] == 480 and site['growth'] == 48
    assert d['cases'][0]['growth'] == 48
    urls = set(re.findall(r'(?:src|href)\s*=\s*["\']?(?:https?:)?//', page))
    assert not urls, urls
    assert 'https://' not in page.replace('http://www.w3.org/2000/svg', '')


if __name__ == '__main__':
    check, path = sys.argv[1:]
    globals()[check](path)
