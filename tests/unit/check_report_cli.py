"""Checks of the JSON reports that test_report_cli.c writes:
`python3 tests/unit/check_report_cli.py CHECK FILE` runs the function CHECK
on the report in FILE and exits non-zero (with a traceback) when an
assertion fails."""
import json
import sys


def sample(r):
    """The sample trace (test_trace_sample.h) with exact values."""
    assert r['format'] == 'memslope-report' and r['version'] == 1
    assert r['command'] == ['./bench', '200']
    assert r['exit'] == {'status': 3}
    assert r['totals'] == {'allocations': 1000, 'frees': 990, 'allocated_bytes': 48000, 'peak_bytes': 4096}
    leaks = {'definitely_lost': {'bytes': 432, 'blocks': 9}, 'indirectly_lost': {'bytes': 48, 'blocks': 1},
             'possibly_lost': {'bytes': 0, 'blocks': 0}, 'still_reachable': {'bytes': 16, 'blocks': 1},
             'suppressed': {'bytes': 0, 'blocks': 0}}
    assert r['leaks_at_exit'] == leaks
    assert len(r['cases']) == 1
    c = r['cases'][0]
    assert c['name'] == 'bench' and c['iterations'] == 0
    assert c['setup'] is None  # no iterations: nothing tells setup from growth
    assert c['growth'] is None and c['leaks'] == leaks and c['peak_bytes'] == 4096
    s = c['sites']
    assert len(s) == 2
    assert [(x['function'], x['file'], x['line'], x['module']) for x in s[0]['frames']] == \
        [('leaky_site', 'leak.c', 6, '/path/bench'), ('main', 'leak.c', 12, '/path/bench')]
    assert s[0]['growth_bytes_per_iteration'] is None and s[0]['user_frame'] == 0 and s[1]['user_frame'] == 0
    assert (s[0]['setup_bytes'], s[0]['live_bytes'], s[0]['leaked_bytes'], s[0]['leaked_blocks']) == (None, 480, 480, 10)
    assert (s[0]['allocations'], s[0]['allocated_bytes']) == (10, 480)
    assert (s[0]['peak_live_bytes'], s[1]['peak_live_bytes']) == (480, 3616)  # the text's 'live bytes at the peak'
    assert [(x['function'], x['file'], x['line'], x['module']) for x in s[1]['frames']] == \
        [('helper', '', 0, '/path/bench'), ('', '', 0, '')]
    assert (s[1]['live_bytes'], s[1]['leaked_bytes'], s[1]['allocations'], s[1]['allocated_bytes']) == (0, 0, 990, 47520)
    p = r['processes']
    assert [(x['pid'], x['exe'], x['primary'], x['execed']) for x in p] == \
        [(100, '/bin/sh', False, True), (100, '/path/bench', True, False)]
    assert p[0]['exit'] is None and p[0]['totals']['allocations'] == 5
    assert p[0]['leaks_at_exit'] is None and 'loss_records' not in p[0]
    assert p[1]['leaks_at_exit'] == leaks
    assert [(x['category'], x['bytes'], x['blocks'], x['frames'][0]['function'], x['user_frame'])
            for x in p[1]['loss_records']] == \
        [('definitely_lost', 432, 9, 'leaky_site', 0), ('indirectly_lost', 48, 1, 'leaky_site', 0)]
    assert 'case_filter' not in r
    assert r['warnings'] == ['stacks were dropped', 'process warning']
    assert 'incomplete' not in r


def metric_allocated_order(r):
    assert r['cases'][0]['sites'][0]['allocations'] == 990


def without_leak_check(r):
    assert r['leaks_at_exit'] is None and r['cases'][0]['leaks'] is None
    assert r['cases'][0]['sites'][0]['leaked_bytes'] == 0


def suppressed(r):
    l = r['leaks_at_exit']
    assert l['suppressed'] == {'bytes': 480, 'blocks': 10}
    assert l['definitely_lost'] == {'bytes': 0, 'blocks': 0}
    assert l['still_reachable'] == {'bytes': 16, 'blocks': 1}
    assert r['cases'][0]['leaks'] == l
    assert r['cases'][0]['sites'][0]['leaked_bytes'] == 0


def python_frames(r):
    s = r['cases'][0]['sites'][0]
    assert [(x['function'], x['module'], x.get('python')) for x in s['frames']] == [
        ('PyBytes_FromStringAndSize', '/usr/bin/python3.11', None), ('Job.step', 'python', True),
        ('<module>', 'python', True), ('Py_BytesMain', '/usr/bin/python3.11', None)]
    assert s['user_frame'] == 1 and s['leaked_bytes'] == 4129


def incomplete(r):
    assert r['incomplete'] is True and r['totals']['allocations'] == 1000
    assert r['warnings'][0].startswith('no END section')


def marked_cases(r):
    c = r['cases']
    assert [(x['name'], x['iterations']) for x in c] == [('parse', 5), ('render', 7)]
    assert c[0]['setup'] == {'bytes': 128, 'blocks': 3} and c[0]['peak_bytes'] == 228
    assert c[0]['leaks']['definitely_lost'] == {'bytes': 32, 'blocks': 1}
    assert [(s['live_bytes'], s['leaked_bytes']) for s in c[0]['sites']] == [(32, 32), (96, 0)]
    assert c[1]['leaks'] is None and c[1]['sites'] == []
    assert r['leaks_at_exit'] is None


def one_case(r):
    assert [x['name'] for x in r['cases']] == ['render']


if __name__ == '__main__':
    check, path = sys.argv[1:]
    globals()[check](json.load(open(path)))
