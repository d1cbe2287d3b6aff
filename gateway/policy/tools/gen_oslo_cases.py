#!/usr/bin/env python3
"""Record how oslo.policy answers, for keelson-policy's differential tests.

Run with the reference Placement virtualenv (oslo.policy 6.0.1,
openstack-placement 16.0.0):

    REF_PYTHON tools/gen_oslo_cases.py > tests/data/oslo-cases.json

It writes two tables:
* "rules": random rule strings (fixed seed) as [rule, oslo's str() of the
  parsed tree, enforce() result per (creds, target) pair: T, F, or E when
  oslo raises];
* "placement": every Placement default against the personas of the
  *-secure-rbac / *-legacy-rbac gabbi files, under several policy files and
  both enforce_new_defaults values. The target is Placement's default
  ({project_id, user_id} of the context) except for placement:usages, which
  gets {project_id: 'P'} as GET /usages?project_id=P does.
"""

import json
import logging
import os
import random
import sys
import tempfile

from oslo_config import cfg
from oslo_context import context
from oslo_policy import _parser
from oslo_policy import policy

from placement import policies

ATOMS = [
    'role:admin', 'role:ADMIN', 'role:reader', 'role:%(r)s', 'role:%(nope)s',
    'project_id:%(project_id)s', 'user_id:%(user_id)s', 'user_id:%(missing)s',
    "'Member':%(name)s", 'True:%(enabled)s', 'is_admin_project:True',
    'system_scope:all', 'system:all', 'domain_id:None', 'rule:yes', 'rule:no',
    'rule:unknown', '@', '!', 'groups:g1', 'groups:g9', 'token.user.id:u',
    'token.user.id:x', 'bad', "'quoted'", 'project_id:p', '1:%(one)s',
    '"x":x', 'roles:Member', 'role:member',
]
OPS = ['and', 'or', 'not', 'AND', 'Or', 'NOT', '(', ')', '(', ')']

CREDS = [
    {'user_id': 'u', 'project_id': 'p', 'roles': ['Member', 'reader'],
     'system_scope': None, 'domain_id': None, 'is_admin_project': True,
     'groups': ['g1', 'g2'], 'token': {'user': {'id': 'u'}}},
    {'user_id': 'admin', 'project_id': None, 'roles': ['admin'],
     'system_scope': 'all', 'domain_id': None, 'is_admin_project': False},
]
TARGETS = [
    {'project_id': 'p', 'user_id': 'u', 'r': 'READER', 'name': 'Member',
     'enabled': True, 'one': 1},
    {'project_id': 'other', 'user_id': None, 'enabled': False, 'name': None},
]


def random_expr(rng, depth=0):
    pick = rng.random()
    if depth > 3 or pick < 0.35:
        return rng.choice(ATOMS)
    kw = lambda w: rng.choice([w, w.upper(), w.capitalize()])
    if pick < 0.45:
        return kw('not') + ' ' + random_expr(rng, depth + 1)
    if pick < 0.6:
        inner = random_expr(rng, depth + 1)
        return rng.choice(['(%s)', '( %s )', '(%s )']) % inner
    op = kw(rng.choice(['and', 'or']))
    return '%s %s %s' % (random_expr(rng, depth + 1), op,
                         random_expr(rng, depth + 1))


def random_rule(rng):
    if rng.random() < 0.75:
        return random_expr(rng)
    words = []
    for _ in range(rng.randint(1, 9)):
        words.append(rng.choice(ATOMS) if rng.random() < 0.55
                     else rng.choice(OPS))
    out = ''
    for w in words:
        sep = '' if (out.endswith('(') or w == ')') and rng.random() < 0.5 \
            else ' '
        out = (out + sep + w) if out else w
    return out


def rule_cases():
    rng = random.Random(20240601)
    conf = cfg.ConfigOpts()
    conf([])
    cases = []
    seen = set()
    while len(cases) < 400:
        text = random_rule(rng)
        if text in seen:
            continue
        seen.add(text)
        enforcer = policy.Enforcer(conf, use_conf=False)
        enforcer.set_rules(policy.Rules.from_dict(
            {'yes': '@', 'no': '!', 'r': text}), use_conf=False)
        results = []
        for creds in CREDS:
            for target in TARGETS:
                try:
                    results.append(bool(
                        enforcer.enforce('r', target, dict(creds))))
                except Exception:  # oslo lets these escape
                    results.append('E')
        cases.append([text, str(_parser.parse_rule(text)),
                      ''.join('T' if r is True else 'F' if r is False else r
                              for r in results)])
    return cases


def persona(roles, project=None, system=None):
    return {'roles': roles, 'project_id': project, 'system_scope': system}


PERSONAS = {
    'admin': persona(['admin'], 'admin_project_id'),
    'service': persona(['service'], 'service_project_id'),
    'system_admin': persona(['admin', 'member', 'reader'], system='all'),
    'system_reader': persona(['reader'], system='all'),
    'project_admin': persona(['admin', 'member', 'reader'], 'P'),
    'project_member': persona(['member', 'reader'], 'P'),
    'project_reader': persona(['reader'], 'P'),
    'alt_project_admin': persona(['admin', 'member', 'reader'], 'P_ALT'),
    'alt_project_member': persona(['member', 'reader'], 'P_ALT'),
    'alt_project_reader': persona(['reader'], 'P_ALT'),
    'no_roles': persona([], 'P'),
}

POLICY_FILES = {
    'none': '{}',
    'custom': ('"placement:resource_providers:list": "role:reader"\n'
               'admin_api: "role:superuser"\n'),
    'deprecated_name': '"rule:admin_api": "role:legacy"\n',
}


def placement_cases():
    """{policy_file: {enforce_new_defaults: {rule: outcome per persona}}}

    Outcome letters, one per persona in PERSONAS order: A allowed, D denied
    by the rule, S refused by the scope check (InvalidScope).
    """
    cases = {}
    tmp = tempfile.mkdtemp()
    for file_name, content in POLICY_FILES.items():
        path = os.path.join(tmp, file_name + '.yaml')
        with open(path, 'w') as f:
            f.write(content)
        for new_defaults in (True, False):
            conf = cfg.ConfigOpts()
            conf([])
            enforcer = policy.Enforcer(conf)
            conf.set_override('policy_file', path, group='oslo_policy')
            conf.set_override('enforce_new_defaults', new_defaults,
                              group='oslo_policy')
            enforcer.policy_file = path
            enforcer.suppress_default_change_warnings = True
            enforcer.suppress_deprecation_warnings = True
            enforcer.register_defaults(policies.list_rules())
            enforcer.load_rules()
            table = cases.setdefault(file_name, {}).setdefault(
                str(new_defaults).lower(), {})
            for rule in policies.list_rules():
                outcomes = ''
                for pname, p in PERSONAS.items():
                    ctx = context.RequestContext(
                        user_id='user', project_id=p['project_id'],
                        roles=p['roles'], system_scope=p['system_scope'])
                    if rule.name == 'placement:usages':
                        target = {'project_id': 'P'}
                    else:
                        target = {'project_id': ctx.project_id,
                                  'user_id': ctx.user_id}
                    try:
                        enforcer.authorize(rule.name, target, ctx,
                                           do_raise=True)
                        outcomes += 'A'
                    except policy.InvalidScope:
                        outcomes += 'S'
                    except policy.PolicyNotAuthorized:
                        outcomes += 'D'
                table[rule.name] = outcomes
    return cases


if __name__ == '__main__':
    logging.disable(logging.CRITICAL)
    json.dump({'generated_by': 'tools/gen_oslo_cases.py (oslo.policy 6.0.1)',
               'creds': CREDS, 'targets': TARGETS, 'personas': PERSONAS,
               'policy_files': POLICY_FILES, 'rules': rule_cases(),
               'placement': placement_cases()},
              sys.stdout, indent=1)
    sys.stdout.write('\n')
