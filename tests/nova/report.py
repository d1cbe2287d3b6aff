"""Compares the subunit streams of one selection run against keelson and
against the in-process Python Placement (either may be absent) and prints
per module: tests, passed/failed/skipped and worker-seconds against each;
then every test whose outcome differs (those in expected-differences.txt
with their reason); then the closing lines

    nova-functional-result: PK FK PP FP DIFFERING

(PK/FK: passed/failed against keelson, PP/FP against Python; DIFFERING:
differences not in expected-differences.txt). Exit status 1 when DIFFERING
is not 0, or a keelson failure has no Python run to compare with.

usage: report.py [--keelson FILE] [--python FILE] [--expected FILE]
                 [--json OUT]
"""

import argparse
import collections
import json
import re
import sys

import subunit
import testtools

# subunit statuses folded into the three outcomes the report counts.
OUTCOME = {'success': 'pass', 'xfail': 'pass', 'skip': 'skip', 'fail': 'fail', 'uxsuccess': 'fail'}


def read_stream(path):
    """{test id: (outcome, seconds)} of one subunit v2 file."""
    results = {}

    def on_test(test):
        status = test['status']
        if status not in OUTCOME:
            return
        start, stop = test['timestamps']
        seconds = (stop - start).total_seconds() if start and stop else 0.0
        results[test['id']] = (OUTCOME[status], seconds)

    with open(path, 'rb') as f:
        case = subunit.ByteStreamToStreamResult(f, non_subunit_name='stdout')
        result = testtools.StreamToDict(on_test)
        result.startTestRun()
        case.run(result)
        result.stopTestRun()
    return results


def module_of(test_id):
    """nova.tests.functional.<module>, the test id less class and method
    (and a scenario suffix in parentheses)."""
    plain = re.sub(r'\(.*\)$', '', test_id)
    return plain.rsplit('.', 2)[0].replace('nova.tests.functional.', '', 1)


def read_expected(path):
    expected = {}
    if not path:
        return expected
    with open(path) as f:
        for line in f:
            line = line.strip()
            if not line or line.startswith('#'):
                continue
            test_id, _, reason = line.partition(' ')
            expected[test_id] = reason.strip()
    return expected


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument('--keelson')
    ap.add_argument('--python')
    ap.add_argument('--expected')
    ap.add_argument('--json')
    args = ap.parse_args()

    runs = collections.OrderedDict()
    if args.keelson:
        runs['keelson'] = read_stream(args.keelson)
    if args.python:
        runs['python'] = read_stream(args.python)
    expected = read_expected(args.expected)

    modules = sorted({module_of(t) for r in runs.values() for t in r})
    table = {}
    head = '%-58s %5s' % ('module', 'tests')
    for name in runs:
        head += '  %-7s %4s %4s %4s %7s' % (name, 'pass', 'fail', 'skip', 'secs')
    print(head)
    for m in modules:
        ids = {t for r in runs.values() for t in r if module_of(t) == m}
        line = '%-58s %5d' % (m, len(ids))
        table[m] = {'tests': len(ids)}
        for name, r in runs.items():
            counts = collections.Counter(r[t][0] for t in ids if t in r)
            secs = sum(r[t][1] for t in ids if t in r)
            table[m][name] = {'pass': counts['pass'], 'fail': counts['fail'], 'skip': counts['skip'],
                              'seconds': round(secs, 1)}
            line += '  %-7s %4d %4d %4d %7.1f' % ('', counts['pass'], counts['fail'], counts['skip'], secs)
        print(line)

    totals = {name: collections.Counter(o for o, _ in r.values()) for name, r in runs.items()}
    for name, c in totals.items():
        print('%s: %d passed, %d failed, %d skipped' % (name, c['pass'], c['fail'], c['skip']))

    unexpected = []
    differences = []
    if 'keelson' in runs and 'python' in runs:
        k, p = runs['keelson'], runs['python']
        # A test that ran against one only (an interrupted run) is not a
        # difference; it is counted apart.
        one_sided = len(set(k) ^ set(p))
        for t in sorted(set(k) & set(p)):
            if k[t][0] != p[t][0]:
                differences.append((t, k[t][0], p[t][0]))
        print('\ntests run against both: %d; against one only: %d' % (len(set(k) & set(p)), one_sided))
        print('tests whose outcome differs (keelson / python): %d' % len(differences))
        for t, ko, po in differences:
            if t in expected:
                print('  %s: %s / %s  (expected: %s)' % (t, ko, po, expected[t]))
            else:
                print('  %s: %s / %s' % (t, ko, po))
                unexpected.append(t)
    elif 'keelson' in runs:
        # Without a Python run every keelson failure counts.
        unexpected = [t for t, (o, _) in runs['keelson'].items() if o == 'fail' and t not in expected]

    if args.json:
        with open(args.json, 'w') as f:
            json.dump({'modules': table, 'differences': differences, 'unexpected': unexpected}, f, indent=1)

    kc = totals.get('keelson', collections.Counter())
    pc = totals.get('python', collections.Counter())
    print('nova-functional-result: %d %d %d %d %d' % (kc['pass'], kc['fail'], pc['pass'], pc['fail'], len(unexpected)))
    return 1 if unexpected else 0


if __name__ == '__main__':
    sys.exit(main())
