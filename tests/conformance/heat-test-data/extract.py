"""Builds the Heat test data the Rust engine tests read, from the
openstack-heat 27.0.1 wheel (downloaded once into a cache directory).

    python extract.py --out DIR [--cache DIR]

Writes into DIR (recreated on every run):

  templates/*.yaml, templates/INDEX.json
      every HOT/CFN template and environment literal of
      heat_integrationtests/functional/test_*.py (string constants that
      parse as YAML, and pure dict literals) that uses no resource of
      another OpenStack service. Found by parsing the modules with `ast`;
      no test code is executed. Strings are written as they stand in the
      source, dict literals as YAML.
  derived_templates.json
      templates the functional tests build from those literals with
      literal arguments (_change_rsrc_properties(...) in
      test_create_update, get_templates(...) in test_simultaneous_update
      and test_stack_cancel), keyed by test and variable.
  convergence_scenarios.json
      heat/tests/convergence/scenarios/*.py as data: each file is executed
      against a recording stand-in for the scenario language (engine.*,
      Template, RsrcDef, GetRes, GetAtt, verify), which records steps
      instead of running an engine.
  MANIFEST.json
      the wheel's sha256 and the counts above.

Step format of convergence_scenarios.json (one entry per scenario file):
  {"op": "create"|"update", "stack": name, "template": HOT}
  {"op": "delete"|"rollback", "stack": name}
  {"op": "process_messages", "count": n}      (engine.noop(n))
  {"op": "verify", "template": HOT}           (engine.call(verify, T))
  {"op": "check", "name": function, "args": [...]}  (engine.call(f, ...))
HOT follows the scenario framework's conversion: version 2013-05-23,
type OS::Heat::TestResource, properties and depends_on only when
non-empty, GetAtt -> get_attr, GetRes -> get_resource.
"""

import argparse
import ast
import copy
import hashlib
import io
import json
import os
import shutil
import subprocess
import sys
import zipfile

import yaml

HEAT_VERSION = '27.0.1'
WHEEL = 'openstack_heat-%s-py3-none-any.whl' % HEAT_VERSION
WHEEL_SHA256 = ('6eb3e0e15da4e86a3f3c21543efcf65c'
                '5848412eb1864423ce4cff56c435897f')
FUNCTIONAL = 'heat_integrationtests/functional/'
SCENARIOS = 'heat/tests/convergence/scenarios/'

TEMPLATE_KEYS = ('heat_template_version', 'HeatTemplateFormatVersion',
                 'AWSTemplateFormatVersion')
ENVIRONMENT_KEYS = {'parameters', 'parameter_defaults', 'resource_registry',
                    'event_sinks', 'encrypted_param_names',
                    'parameter_merge_strategies'}
# Resource type prefixes that need a service other than Heat itself; a
# template using any of them cannot run against the orchestration API
# alone.
FOREIGN_TYPE_PREFIXES = ('OS::Nova::', 'OS::Neutron::', 'OS::Cinder::',
                         'OS::Swift::', 'OS::Keystone::', 'OS::Glance::',
                         'OS::Trove::', 'OS::Sahara::', 'OS::Zaqar::',
                         'OS::Octavia::', 'OS::Aodh::', 'OS::Mistral::',
                         'OS::Senlin::', 'OS::Magnum::', 'OS::Manila::',
                         'OS::Designate::', 'OS::Barbican::', 'OS::Monasca::',
                         'OS::Zun::', 'OS::Blazar::', 'OS::Ironic::',
                         'AWS::EC2::', 'AWS::ElasticLoadBalancing::',
                         'AWS::S3::', 'AWS::IAM::', 'AWS::RDS::',
                         'AWS::AutoScaling::', 'AWS::CloudWatch::',
                         'AWS::CloudFormation::WaitCondition',
                         # signals through a Swift temp URL
                         'OS::Heat::SwiftSignal')

# Expected sizes of this wheel's material; fewer means the extraction
# broke, more means the rules changed and the tests' counts must follow.
EXPECTED = {'templates': 125, 'environments': 32, 'derived_templates': 33,
            'convergence_scenarios': 21}


def ensure_wheel(cache):
    """The wheel from the cache, downloaded with pip when missing."""
    os.makedirs(cache, exist_ok=True)
    path = os.path.join(cache, WHEEL)
    if not os.path.exists(path):
        subprocess.run([sys.executable, '-m', 'pip', 'download', '--no-deps',
                        '--only-binary=:all:', '--dest', cache,
                        'openstack-heat==%s' % HEAT_VERSION],
                       check=True, timeout=600)
    with open(path, 'rb') as f:
        digest = hashlib.sha256(f.read()).hexdigest()
    if digest != WHEEL_SHA256:
        sys.exit('%s: sha256 %s, expected %s' % (path, digest, WHEEL_SHA256))
    return path, digest


def sources(wheel, prefix, basename_prefix=''):
    """(path, text) of the .py files directly under prefix, sorted."""
    with zipfile.ZipFile(wheel) as z:
        names = sorted(n for n in z.namelist()
                       if n.startswith(prefix) and n.endswith('.py')
                       and '/' not in n[len(prefix):]
                       and n[len(prefix):].startswith(basename_prefix))
        return [(n, z.read(n).decode('utf-8')) for n in names]


# ---------------------------------------------------------------- templates

def classify(doc):
    """'template', 'environment' or None for a parsed literal."""
    if not isinstance(doc, dict) or not doc:
        return None
    if any(k in doc for k in TEMPLATE_KEYS):
        return 'template'
    if all(isinstance(k, str) for k in doc) and set(doc) <= ENVIRONMENT_KEYS:
        return 'environment'
    return None


def resource_types(doc):
    for section in ('resources', 'Resources'):
        for defn in (doc.get(section) or {}).values():
            if isinstance(defn, dict):
                t = defn.get('type', defn.get('Type'))
                if isinstance(t, str):
                    yield t
    registry = doc.get('resource_registry') or {}
    for v in registry.values():
        if isinstance(v, str):
            yield v


def service_free(doc):
    return not any(t.startswith(FOREIGN_TYPE_PREFIXES)
                   for t in resource_types(doc))


def literal(node):
    """The Python value of a constant expression, else None."""
    try:
        return ast.literal_eval(node)
    except (ValueError, TypeError, SyntaxError, MemoryError,
            RecursionError):
        return None


def parse_literal(value):
    """(document, source text or None) of a string/dict literal."""
    if isinstance(value, str):
        try:
            doc = yaml.safe_load(value)
        except yaml.YAMLError:
            return None, None
        return doc, value
    if isinstance(value, dict):
        return value, None
    return None, None


class LiteralFinder(ast.NodeVisitor):
    """Assignments `name = <literal>` with their scope (Class,
    Class.method or function)."""

    def __init__(self):
        self.scope = []
        self.found = []  # (scope, variable, line, value)

    def visit_ClassDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    def visit_FunctionDef(self, node):
        self.scope.append(node.name)
        self.generic_visit(node)
        self.scope.pop()

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_Assign(self, node):
        if len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            value = literal(node.value)
            if value is not None:
                self.found.append(('.'.join(self.scope), node.targets[0].id,
                                   node.lineno, value))
        self.generic_visit(node)


def module_stem(path):
    return os.path.basename(path)[len('test_'):-len('.py')]


def file_name(stem, scope, variable):
    parts = [stem]
    if scope:
        parts.append(scope.replace('.', '_'))
    parts.append(variable)
    return '__'.join(parts) + '.yaml'


def extract_templates(wheel):
    """{file name: (index entry, yaml text)} and the module-level template
    dicts by module (for the derived templates)."""
    out = {}
    module_dicts = {}
    for path, text in sources(wheel, FUNCTIONAL, 'test_'):
        finder = LiteralFinder()
        finder.visit(ast.parse(text, path))
        stem = module_stem(path)
        for scope, variable, line, value in finder.found:
            doc, raw = parse_literal(value)
            kind = classify(doc)
            if kind is None or not service_free(doc):
                continue
            if raw is None:
                body = yaml.safe_dump(doc, sort_keys=False,
                                      default_flow_style=False)
                if not scope:
                    module_dicts.setdefault(stem, {})[variable] = doc
            else:
                body = raw.lstrip('\n')
                if not body.endswith('\n'):
                    body += '\n'
            name = file_name(stem, scope, variable)
            # A variable bound twice in one scope: number the later ones.
            n = 1
            while name in out:
                n += 1
                name = file_name(stem, scope, '%s_%d' % (variable, n))
            out[name] = ({'kind': kind, 'scope': scope, 'variable': variable,
                          'source': '%s:%d' % (path, line)}, body)
    return out, module_dicts


# -------------------------------------------------------- derived templates

def change_rsrc_properties(template, rsrcs, values):
    """What test_create_update's helper of that name returns: a copy with
    `values` set on the properties of each resource in `rsrcs`."""
    result = copy.deepcopy(template)
    for name in rsrcs:
        result['resources'][name].setdefault('properties', {}).update(values)
    return result


def set_value_everywhere(template, value):
    result = copy.deepcopy(template)
    for defn in result['resources'].values():
        defn['properties']['value'] = value
    return result


def simultaneous_update_templates(base, fail=False, delay_s=None):
    """test_simultaneous_update.get_templates: `after` sets value Test2 on
    every resource; `before` sets test2's fail flag and, when given, its
    create delay."""
    before = copy.deepcopy(base)
    after = set_value_everywhere(before, 'Test2')
    props = before['resources']['test2']['properties']
    props['fail'] = fail
    if delay_s is not None:
        props['action_wait_secs']['create'] = delay_s
    return before, after


def stack_cancel_templates(base, delay_s=None):
    """test_stack_cancel.get_templates: `after` sets value Test2 on every
    resource; a delay, when given, becomes test1's create wait in
    `before`."""
    before = copy.deepcopy(base)
    after = set_value_everywhere(before, 'Test2')
    if delay_s:
        before['resources']['test1']['properties']['action_wait_secs'][
            'create'] = delay_s
    return before, after


# module stem -> (module-level template variable, builder)
TEMPLATE_PAIR_BUILDERS = {
    'simultaneous_update': ('_test_template', simultaneous_update_templates),
    'stack_cancel': ('template', stack_cancel_templates),
}


def callee_name(call):
    f = call.func
    if isinstance(f, ast.Name):
        return f.id
    if isinstance(f, ast.Attribute):
        return f.attr
    return None


class DerivedFinder(ast.NodeVisitor):
    """Within each function, follows assignments in order and evaluates
    the template-building helper calls whose arguments are literals or
    names bound earlier in the same function (or module templates)."""

    def __init__(self, stem, module_templates, out, path):
        self.stem = stem
        self.module = module_templates
        self.out = out
        self.path = path
        self.classes = []

    def visit_ClassDef(self, node):
        self.classes.append(node.name)
        self.generic_visit(node)
        self.classes.pop()

    def visit_FunctionDef(self, node):
        scope = '.'.join(self.classes + [node.name])
        local = {}
        assigns = [s for s in ast.walk(node)
                   if isinstance(s, ast.Assign) and len(s.targets) == 1]
        # Source order, so that a name is bound before it is used.
        for stmt in sorted(assigns, key=lambda s: (s.lineno, s.col_offset)):
            self.assign(scope, local, stmt)

    def value(self, local, node):
        if isinstance(node, ast.Name):
            if node.id in local:
                return local[node.id]
            return self.module.get(node.id)
        return literal(node)

    def record(self, scope, variable, line, template):
        key = '%s::%s::%s' % (self.stem, scope, variable)
        self.out[key] = {'source': '%s:%d' % (self.path, line),
                         'template': template}

    def assign(self, scope, local, stmt):
        target, value = stmt.targets[0], stmt.value
        if isinstance(target, ast.Name):
            if isinstance(value, ast.Call) and \
                    callee_name(value) == '_change_rsrc_properties' and \
                    len(value.args) == 3 and not value.keywords:
                args = [self.value(local, a) for a in value.args]
                if any(a is None for a in args):
                    return
                derived = change_rsrc_properties(*args)
                local[target.id] = derived
                self.record(scope, target.id, stmt.lineno, derived)
                return
            v = literal(value)
            if v is not None:
                local[target.id] = v
            return
        if isinstance(target, ast.Tuple) and isinstance(value, ast.Call) \
                and callee_name(value) == 'get_templates' \
                and self.stem in TEMPLATE_PAIR_BUILDERS \
                and not value.args:
            base_name, build = TEMPLATE_PAIR_BUILDERS[self.stem]
            kwargs = {k.arg: literal(k.value) for k in value.keywords}
            pair = build(self.module[base_name], **kwargs)
            for name_node, template in zip(target.elts, pair):
                if isinstance(name_node, ast.Name):
                    local[name_node.id] = template
                    self.record(scope, name_node.id, stmt.lineno, template)


def extract_derived(wheel, module_dicts):
    out = {}
    for path, text in sources(wheel, FUNCTIONAL, 'test_'):
        stem = module_stem(path)
        DerivedFinder(stem, module_dicts.get(stem, {}), out, path).visit(
            ast.parse(text, path))
    return dict(sorted(out.items()))


# ---------------------------------------------------- convergence scenarios

class GetRes:
    def __init__(self, target_name):
        self.target_name = target_name


class GetAtt(GetRes):
    def __init__(self, target_name, attr):
        super().__init__(target_name)
        self.attr = attr


class RsrcDef:
    def __init__(self, properties, depends_on):
        self.properties = properties
        self.depends_on = depends_on


class Template:
    def __init__(self, resources=None, key=None):
        self.resources = resources or {}


def to_hot(tmpl):
    resources = {}
    for name, defn in tmpl.resources.items():
        res = {'type': 'OS::Heat::TestResource'}
        if defn.properties:
            props = {}
            for prop, value in defn.properties.items():
                if isinstance(value, GetAtt):
                    value = {'get_attr': [value.target_name, value.attr]}
                elif isinstance(value, GetRes):
                    value = {'get_resource': value.target_name}
                props[prop] = value
            res['properties'] = props
        if defn.depends_on:
            res['depends_on'] = list(defn.depends_on)
        resources[name] = res
    return {'heat_template_version': '2013-05-23', 'resources': resources}


def verify(*_args):
    """Stands for the framework's verify; only its identity matters."""


class RecordingEngine:
    def __init__(self):
        self.steps = []

    def create_stack(self, stack_name, tmpl):
        self.steps.append({'op': 'create', 'stack': stack_name,
                           'template': to_hot(tmpl)})

    def update_stack(self, stack_name, tmpl):
        self.steps.append({'op': 'update', 'stack': stack_name,
                           'template': to_hot(tmpl)})

    def delete_stack(self, stack_name):
        self.steps.append({'op': 'delete', 'stack': stack_name})

    def rollback_stack(self, stack_name):
        self.steps.append({'op': 'rollback', 'stack': stack_name})

    def noop(self, count):
        self.steps.append({'op': 'process_messages', 'count': count})

    def call(self, func, *args):
        if func is verify:
            (tmpl,) = args
            self.steps.append({'op': 'verify', 'template': to_hot(tmpl)})
        else:
            self.steps.append({'op': 'check', 'name': func.__name__,
                               'args': list(args)})


class Unused:
    """test / reality / worker: only referenced inside the check
    functions, which are recorded, never called."""

    def __getattr__(self, name):
        raise RuntimeError('scenario used %s at load time' % name)


def extract_scenarios(wheel):
    out = {}
    for path, text in sources(wheel, SCENARIOS):
        name = os.path.basename(path)[:-len('.py')]
        if name == '__init__':
            continue
        engine = RecordingEngine()
        env = {'engine': engine, 'worker': Unused(), 'test': Unused(),
               'reality': Unused(), 'verify': verify, 'Template': Template,
               'RsrcDef': RsrcDef, 'GetRes': GetRes, 'GetAtt': GetAtt}
        exec(compile(text, path, 'exec'), env)
        out[name] = {'source': path, 'steps': engine.steps}
    return out


# --------------------------------------------------------------------- main

def write_json(path, data):
    with io.open(path, 'w', encoding='utf-8') as f:
        json.dump(data, f, indent=1, sort_keys=False)
        f.write('\n')


def main():
    parser = argparse.ArgumentParser(description=__doc__.split('\n')[0])
    parser.add_argument('--out', required=True,
                        help='output directory (replaced)')
    parser.add_argument('--cache', default=os.path.expanduser(
        '~/.cache/keelson-conformance'), help='where the wheel is kept')
    args = parser.parse_args()

    wheel, digest = ensure_wheel(args.cache)
    templates, module_dicts = extract_templates(wheel)
    derived = extract_derived(wheel, module_dicts)
    scenarios = extract_scenarios(wheel)

    counts = {
        'templates': sum(1 for e, _ in templates.values()
                         if e['kind'] == 'template'),
        'environments': sum(1 for e, _ in templates.values()
                            if e['kind'] == 'environment'),
        'derived_templates': len(derived),
        'convergence_scenarios': len(scenarios),
    }
    for key, want in EXPECTED.items():
        if counts[key] != want:
            sys.exit('%s: found %d, expected %d' % (key, counts[key], want))

    if os.path.isdir(args.out):
        shutil.rmtree(args.out)
    tdir = os.path.join(args.out, 'templates')
    os.makedirs(tdir)
    for name, (_, body) in sorted(templates.items()):
        with io.open(os.path.join(tdir, name), 'w', encoding='utf-8') as f:
            f.write(body)
    write_json(os.path.join(tdir, 'INDEX.json'),
               {n: e for n, (e, _) in sorted(templates.items())})
    write_json(os.path.join(args.out, 'derived_templates.json'), derived)
    write_json(os.path.join(args.out, 'convergence_scenarios.json'),
               scenarios)
    write_json(os.path.join(args.out, 'MANIFEST.json'),
               {'wheel': WHEEL, 'sha256': digest, 'counts': counts})
    print('%s: %s' % (args.out, ', '.join(
        '%d %s' % (v, k) for k, v in counts.items())))


if __name__ == '__main__':
    main()
