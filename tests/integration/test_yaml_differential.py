"""Templates read as Heat reads them: seeded random YAML documents (YAML 1.1
scalars in every form, quoting styles and explicit tags, block and flow
collections, anchors and aliases, merge keys, duplicate keys) go through
Heat 27.0.1's own loader (heat.common.template_format.simple_parse, PyYAML
with libyaml, in a virtualenv of this test's own) and through `keelson
template parse --batch`; the answers must be the same.

Heat's answer is taken end to end: its value as Heat's JSON encoder
(oslo_serialization.jsonutils) stores it and reads it back. Intended
differences, each counted and printed:
  * Heat keeps a value JSON cannot hold (NaN, Infinity, an integer beyond 64
    bits, a value that contains itself); keelson refuses the document.
  * libyaml (Heat's first loader) refuses `key:` right before a flow
    indicator (`{a:, b: 1}`) and a tag right before `]` or `}`; Heat then
    reads the text again with the plain SafeLoader, without its own rules
    (dates become datetimes, which its JSON encoder then rewrites or
    refuses). keelson refuses these texts, as Heat's loader does.
Both refusing a document counts as agreement (the texts differ).

KEELSON_YAML_CASES sets the number of documents (default 4000),
KEELSON_YAML_SEED the seed (default: random, printed).
"""
import json
import math
import os
import random
import subprocess
import sys

import pytest

from conftest import ROOT, keelson_bin

HEAT_VERSION = '27.0.1'
CACHE = os.environ.get('XDG_CACHE_HOME', os.path.expanduser('~/.cache'))
VENV = os.environ.get('KEELSON_YAML_HEAT_VENV', os.path.join(CACHE, 'keelson-yaml-heat-venv'))
# What importing heat.common.template_format needs (Heat itself goes in
# without its dependencies).
REQUIREMENTS = ['PyYAML>=6', 'oslo.config', 'oslo.serialization', 'oslo.log', 'oslo.utils', 'oslo.i18n']

HEAT_WORKER = r'''
import json, math, sys
import yaml
from heat.common import template_format
from oslo_serialization import jsonutils

def unrepresentable(v):
    if isinstance(v, float):
        return not math.isfinite(v)
    if isinstance(v, bool):
        return False
    if isinstance(v, int):
        return not (-2**63 <= v < 2**64)
    if isinstance(v, list):
        return any(unrepresentable(x) for x in v)
    if isinstance(v, dict):
        return any(unrepresentable(x) for x in v.values())
    return False

class RuleLoader(yaml.SafeLoader):
    """Heat's loader on the pure-Python base: its two constructor rules."""

RuleLoader.add_constructor('tag:yaml.org,2002:str', RuleLoader.construct_scalar)
RuleLoader.add_constructor('tag:yaml.org,2002:timestamp', RuleLoader.construct_scalar)

def end_to_end(tpl):
    try:
        value = json.loads(jsonutils.dumps(tpl))
    except Exception as e:
        return {'unrepresentable': '%s: %s' % (type(e).__name__, e)}
    if unrepresentable(value):
        return {'unrepresentable': 'NaN, Infinity or an integer beyond 64 bits'}
    return {'value': value}

for line in sys.stdin:
    text = json.loads(line)
    try:
        tpl = template_format.simple_parse(text)
    except Exception as e:
        out = {'error': {'type': type(e).__name__, 'message': str(e)}}
    else:
        out = end_to_end(tpl)
        try:
            json.loads(text)
        except ValueError:
            try:
                yaml.load(text, Loader=template_format.yaml_loader)
            except yaml.YAMLError:
                # libyaml refused it and Heat fell back to the plain
                # SafeLoader, dropping its own rules (dates become datetimes).
                ruled = yaml.load(text, Loader=RuleLoader)
                out = {'fallback': end_to_end({} if ruled is None else ruled), 'heat': out}
    sys.stdout.write(json.dumps(out) + '\n')
'''


def heat_python():
    """The virtualenv with Heat's loader, made once (idempotent)."""
    py = os.path.join(VENV, 'bin', 'python')
    stamp = os.path.join(VENV, '.keelson-heat-%s' % HEAT_VERSION)
    if os.path.exists(stamp):
        return py
    if not os.path.exists(py):
        subprocess.run([sys.executable, '-m', 'venv', VENV], check=True)
    pip = [py, '-m', 'pip', 'install', '-q', '--disable-pip-version-check']
    subprocess.run(pip + REQUIREMENTS, check=True)
    wheel = os.path.join(CACHE, 'keelson-conformance', 'openstack_heat-%s-py3-none-any.whl' % HEAT_VERSION)
    subprocess.run(pip + ['--no-deps', wheel if os.path.exists(wheel) else 'openstack-heat==%s' % HEAT_VERSION],
                   check=True)
    # Not from this directory: its heat.py would shadow Heat's package.
    subprocess.run([py, '-c', 'import heat.common.template_format, yaml; assert yaml.__with_libyaml__'], check=True,
                   cwd=VENV)
    open(stamp, 'w').close()
    return py


# ---- the generator ----

BOOLS = 'yes Yes YES no No NO true True TRUE false False FALSE on On ON off Off OFF y Y n N yEs oN'.split()
INTS = ('0 -0 +0 7 -12 +12 010 -010 0_7 00 09 0o17 0x1F -0x1f 0x_1 0X1F 0b101 -0b11 1_000 1__0 1_ 1:20 -1:20 '
        '1:2:3 1:70 0:20 +1:0 123456789012345678 12345678901234567890 -9223372036854775808 '
        '18446744073709551615').split()
FLOATS = ('1.5 -1.5 +1.5 1. .5 -.5 +.5 1.0e+5 1.0e5 1e5 1E+5 1.5E-3 1.5e-03 1_0.5 1._5 .5e+3 1:20.5 -1:20.5 '
          '0:20.5 1:20. -.nan 6.02e+23 0.1 -0.0 '
          '3.141592653589793 1e+16 100.').split()
NULLS = '~ null Null NULL NuLL nUll'.split()
TIMESTAMPS = ['2001-12-14', '2013-05-23', '2001-12-14t21:59:43.10-05:00', '2001-12-14 21:59:43.10 -5',
              '2001-12-14T21:59:43Z', '2001-1-1']
WORDS = ['hello', 'hello world', 'a-b', '_x', 'x_y', 'é', 'naïve', '日本語', '+', '.', '..', '1.2.3', '1-2', '0x',
         '0b', '1e', 'e5', 'x#y', 'yes please', 'on-off', 'true1', 'Nan', 'inf', '_', '-x', '1_000x', '$', 'a=b']
# Plain only outside flow collections (a ':' or flow indicator inside).
BLOCK_ONLY_WORDS = ['a:b', 'http://example.com/x', 'x]', 'x,y', '{x']
KEYS = ['a', 'b', 'c', 'name', '1', '1.0', 'true', 'yes', '~', 'null', 'x y', 'é', '=', '0x1', '010', '8',
        '1.5', '.inf', '.nan', 'on', 'off', '2001-12-14', '0', 'False', 'no', '-.inf', '1e5', '12345678901234567890123']
ESCAPES = ['\\n', '\\t', '\\\\', '\\"', '\\x41', '\\u00e9', '\\U0001F600', '\\/', '\\0', '\\ ']
TAGGED = ['!!str 12', '!!str yes', '!!int "12"', '!!int 0x1F', '!!float 1', '!!float "1.5"', '!!bool yes',
          '!!bool "off"', '!!null ~', '!!null ""', '! 12', '! "12"', "! 'yes'", '!!binary aGVsbG8=',
          '!!binary "aGVs\\nbG8="', '!!timestamp 2001-12-14', '!!str', '!<tag:yaml.org,2002:str> 5']
# Each makes the whole document refused (by one side or both): rare.
REFUSED = ['!!int "abc"', '!foo 1', '!!bool maybe', '<<', '=', '!!merge x', '!!value x', '!!int ""']
UNREPRESENTABLE = ['.inf', '-.inf', '+.inf', '.Inf', '-.INF', '.nan', '.NaN', '.NAN', '1.0e+400', '!!binary //79',
                   '123456789012345678901234567890', '-9223372036854775809', '18446744073709551616']


class Generator:
    def __init__(self, rng):
        self.r = rng
        self.anchors = []       # (name, kind) of complete anchored nodes
        self.open = []          # names of anchored nodes being generated
        self.counter = 0

    def chance(self, p):
        return self.r.random() < p

    def pick(self, seq):
        return self.r.choice(seq)

    # -- scalars --
    def plain_text(self, flow):
        pool = self.pick([BOOLS, INTS, FLOATS, NULLS, TIMESTAMPS, WORDS, WORDS]
                         + ([] if flow else [BLOCK_ONLY_WORDS]))
        return self.pick(pool)

    def any_text(self):
        text = self.pick(BOOLS + INTS + FLOATS + NULLS + TIMESTAMPS + WORDS + BLOCK_ONLY_WORDS + KEYS)
        return text + (' ' + self.pick(WORDS) if self.chance(0.2) else '')

    def single_quoted(self):
        text = self.any_text()
        if self.chance(0.2):
            text = "it's " + text
        return "'" + text.replace("'", "''") + "'"

    def double_quoted(self):
        text = self.any_text().replace('\\', '\\\\').replace('"', '\\"')
        if self.chance(0.4):
            text += self.pick(ESCAPES)
        return '"' + text + '"'

    def scalar(self, flow, as_key=False):
        """One scalar token: plain, quoted or tagged."""
        roll = self.r.random()
        if as_key:
            if roll < 0.6:
                return self.pick(KEYS)
            if roll < 0.75:
                return self.plain_text(True)
            return self.single_quoted() if roll < 0.88 else self.double_quoted()
        if roll < 0.55:
            return self.plain_text(flow)
        if roll < 0.7:
            return self.single_quoted()
        if roll < 0.85:
            return self.double_quoted()
        if roll < 0.996:
            return self.pick(TAGGED)
        return self.pick(REFUSED if self.chance(0.3) else UNREPRESENTABLE)

    def block_scalar(self):
        header = self.pick(['|', '>', '|-', '>-', '|+', '>+'])
        lines = [self.pick(WORDS + INTS + BOOLS) for _ in range(self.r.randint(1, 3))]
        if self.chance(0.3):
            lines.insert(1, '')
        return header, lines

    # -- properties and aliases --
    def new_anchor(self):
        if self.anchors and self.chance(0.01):
            return self.pick(self.anchors)[0]     # a duplicate anchor: refused by both
        self.counter += 1
        return 'a%d' % self.counter

    def alias(self, kind=None):
        choices = [n for n, k in self.anchors if kind is None or k == kind]
        if self.open and self.chance(0.02):
            return '*' + self.pick(self.open)      # contains itself
        return '*' + self.pick(choices) if choices else None

    # -- nodes: ('inline', text) or ('block', kind, props, lines) or ('scalar_block', header, lines) --
    def node(self, depth, flow, in_block_context=True):
        roll = self.r.random()
        if not flow and self.anchors and roll < 0.08:
            a = self.alias()
            if a:
                return ('inline', a)
        if depth >= 4 or roll < 0.45:
            anchor = '&%s ' % self.new_anchor() if self.chance(0.08) else ''
            if not flow and in_block_context and self.chance(0.05):
                header, lines = self.block_scalar()
                if anchor:
                    self.anchors.append((anchor[1:-1], 'scalar'))
                return ('scalar_block', anchor + header, lines)
            text = self.scalar(flow)
            if anchor:
                self.anchors.append((anchor[1:-1], 'scalar'))
            return ('inline', anchor + text)
        kind = 'map' if self.chance(0.55) else 'seq'
        name = self.new_anchor() if self.chance(0.15) else None
        props = '&%s' % name if name else ''
        if self.chance(0.03):
            props = (props + ' ' if props else '') + ('!!map' if kind == 'map' else '!!seq')
        if name:
            self.open.append(name)
        as_flow = flow or self.chance(0.3)
        if as_flow:
            text = self.flow_collection(kind, depth)
            result = ('inline', (props + ' ' if props else '') + text)
        else:
            lines = self.block_mapping(depth) if kind == 'map' else self.block_sequence(depth)
            result = ('block', kind, props, lines)
        if name:
            self.open.remove(name)
            self.anchors.append((name, kind))
        return result

    def merge_value(self):
        roll = self.r.random()
        maps = [n for n, k in self.anchors if k == 'map']
        if maps and roll < 0.5:
            return '*' + self.pick(maps)
        if len(maps) >= 2 and roll < 0.8:
            return '[' + ', '.join('*' + self.pick(maps) for _ in range(self.r.randint(2, 3))) + ']'
        if roll < 0.9:
            return '{%s: %s}' % (self.scalar(True, as_key=True), self.scalar(True))
        return self.pick(['*' + self.pick(maps) if maps else '{}', '1', '[1]', '[{a: 1}, x]'])

    def keys(self, depth):
        count = self.r.randint(0, 5) if depth else self.r.randint(1, 6)
        for _ in range(count):
            if self.chance(0.08):
                yield '<<', None
            else:
                yield self.scalar(False, as_key=True), self.r.random()

    def flow_collection(self, kind, depth):
        items = []
        if kind == 'map':
            for key, _ in self.keys(depth):
                if key == '<<':
                    items.append('<<: ' + self.merge_value())
                else:
                    value = self.node(depth + 1, True)[1] if self.chance(0.98) else ''
                    items.append(key + ': ' + value if value else key + ':')
            return '{' + ', '.join(items) + '}'
        for _ in range(self.r.randint(0, 4)):
            items.append(self.node(depth + 1, True)[1])
        return '[' + ', '.join(items) + ']'

    def block_mapping(self, depth):
        lines = []
        for key, _ in self.keys(depth):
            if key == '<<':
                lines.append('<<: ' + self.merge_value())
                continue
            if self.chance(0.05):
                lines.append(key + ':')
                continue
            lines.extend(self.entry(key + ':', self.node(depth + 1, False), indentless=self.chance(0.5)))
        return lines or ['{}']

    def block_sequence(self, depth):
        lines = []
        for _ in range(self.r.randint(1, 4)):
            lines.extend(self.item(self.node(depth + 1, False)))
        return lines

    def entry(self, head, node, indentless):
        if node[0] == 'inline':
            return [head + ' ' + node[1]]
        if node[0] == 'scalar_block':
            return [head + ' ' + node[1]] + ['  ' + line if line else '' for line in node[2]]
        _, kind, props, lines = node
        pad = '' if kind == 'seq' and indentless else '  '
        first = [head + (' ' + props if props else '')]
        return first + [pad + line for line in lines]

    def item(self, node):
        if node[0] == 'inline':
            return ['- ' + node[1]]
        if node[0] == 'scalar_block':
            return ['- ' + node[1]] + ['  ' + line if line else '' for line in node[2]]
        _, kind, props, lines = node
        if props or lines == ['{}']:
            return ['- ' + props if props else '-'] + ['  ' + line for line in lines]
        return ['- ' + lines[0]] + ['  ' + line for line in lines[1:]]

    def document(self):
        roll = self.r.random()
        if roll < 0.02:
            return self.pick(['', '~', '---\n', '- 1\n- 2\n', 'just text', '[1, 2]', 'null', '{}', '42'])
        if roll < 0.2:
            return self.flow_collection('map', 0) + '\n'
        text = '\n'.join(self.block_mapping(0)) + '\n'
        if self.chance(0.05):
            text = '---\n' + text
        if self.chance(0.02):
            text += '---\nsecond: document\n'
        return text


def generate(seed, count):
    rng = random.Random(seed)
    return [Generator(rng).document() for _ in range(count)]


# ---- the comparison ----

def same(a, b):
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return list(a) == list(b) and all(same(a[k], b[k]) for k in a)
    if isinstance(a, list):
        return len(a) == len(b) and all(same(x, y) for x, y in zip(a, b))
    if isinstance(a, float):
        return repr(a) == repr(b)
    return a == b


FALLBACK = "intended: libyaml refuses, keelson too; Heat's fallback loader reads it"


def run_batch(cmd, docs):
    payload = ''.join(json.dumps(d) + '\n' for d in docs)
    proc = subprocess.run(cmd, input=payload, capture_output=True, text=True, timeout=300, cwd=VENV)
    assert proc.returncode == 0, proc.stderr[-2000:]
    lines = proc.stdout.splitlines()
    assert len(lines) == len(docs), proc.stderr[-2000:]
    return [json.loads(line) for line in lines]


def test_keelson_reads_templates_as_heat_does(tmp_path):
    count = int(os.environ.get('KEELSON_YAML_CASES', '4000'))
    seed = int(os.environ.get('KEELSON_YAML_SEED', str(random.randrange(2**32))))
    print('\nyaml differential: seed %d (KEELSON_YAML_SEED=%d reproduces), %d documents' % (seed, seed, count))
    docs = generate(seed, count)
    heat = run_batch([heat_python(), '-c', HEAT_WORKER], docs)
    conf = tmp_path / 'keelson.conf'
    conf.write_text('[orchestration]\n')
    keelson = run_batch([keelson_bin(), '--config-file', str(conf), 'template', 'parse', '--batch'], docs)

    tally = {'identical': 0, 'both refuse': 0, 'intended: Heat keeps a value JSON cannot hold, keelson refuses': 0,
             FALLBACK: 0}
    mismatches = []
    for doc, h, k in zip(docs, heat, keelson):
        if 'value' in h and 'value' in k and same(h['value'], k['value']):
            tally['identical'] += 1
        elif 'error' in h and 'error' in k:
            tally['both refuse'] += 1
        elif 'unrepresentable' in h and 'error' in k:
            tally['intended: Heat keeps a value JSON cannot hold, keelson refuses'] += 1
        elif 'fallback' in h and 'error' in k:
            tally[FALLBACK] += 1
        else:
            mismatches.append((doc, h, k))
    for name, n in tally.items():
        print('  %-66s %d/%d' % (name, n, count))
    print('  %-66s %d/%d' % ('different', len(mismatches), count))
    for doc, h, k in mismatches[:10]:
        print('--- document %r\n  heat:    %s\n  keelson: %s' % (doc, json.dumps(h)[:600], json.dumps(k)[:600]))
    assert not mismatches, '%d of %d documents read differently (seed %d)' % (len(mismatches), count, seed)
    # The generator must mostly produce documents both read.
    assert tally['identical'] > count // 2, tally
