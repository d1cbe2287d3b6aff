#!/usr/bin/env python3
"""Extract the schema-validation expectations of Placement's gabbi tests.

Usage: gabbi_cases.py GABBITS_DIR > tests/data/gabbi-cases.json

For every test that expects a 400, work out which Placement schema the
request is validated against at its microversion (the same choice the
upstream handlers make), build the validated instance (the JSON body, or
``dict(req.GET)`` for query strings) with ``$ENVIRON``/``$HISTORY``
placeholders replaced by fixed values, and record the test's expected
strings verbatim (``response_strings`` and ``$.errors[0].detail`` JSON
paths). Tests whose 400 does not come from schema validation (the instance is
valid, or the request is rejected earlier) are left out.

Every case is also run through Python jsonschema (see oracle.py); a case
whose expectations the real validator would not satisfy is reported on
stderr and dropped, which catches mistakes in the instance reconstruction.
"""
import json
import os
import re
import sys
import urllib.parse
import uuid

import yaml

LATEST = (1, 39)
ENV_PATTERN = re.compile(r"\$ENVIRON\['(\w+)'\]")
HISTORY_PATTERN = re.compile(r"\$HISTORY\['[^']*'\]\.\$RESPONSE\['[^']*'\]")
UUID_PATH = r'[0-9a-fA-F-]{32,36}'

# A valid allocations value standing in for one copied from an earlier
# response ($HISTORY ... allocation_requests[0].allocations).
SAMPLE_ALLOCATIONS = {
    str(uuid.uuid5(uuid.NAMESPACE_URL, 'sample-rp')): {
        'resources': {'DISK_GB': 10}},
}

# Requests rejected before schema validation even though their instance is
# invalid under the schema (the expectation comes from elsewhere).
NOT_SCHEMA = {
    ('basic-http.yaml', 'post resource provider missing content-type'),
}


def env_value(name):
    if name.startswith('CUSTOM_'):
        return 'CUSTOM_IRON_NFV'
    return str(uuid.uuid5(uuid.NAMESPACE_URL, name))


def substitute(value):
    if isinstance(value, str):
        if HISTORY_PATTERN.fullmatch(value) and 'allocations' in value:
            return dict(SAMPLE_ALLOCATIONS)
        value = ENV_PATTERN.sub(lambda m: env_value(m.group(1)), value)
        return HISTORY_PATTERN.sub(
            lambda m: str(uuid.uuid5(uuid.NAMESPACE_URL, m.group(0))), value)
    if isinstance(value, list):
        return [substitute(v) for v in value]
    if isinstance(value, dict):
        return {substitute(k): substitute(v) for k, v in value.items()}
    return value


def parse_version(header):
    if header is None:
        return (1, 0)
    text = str(header).replace('placement', '').strip()
    if text == 'latest':
        return LATEST
    try:
        major, minor = text.split('.')
        return (int(major), int(minor))
    except ValueError:
        return None


def pick(version, table, default=None):
    """table: [(min_version, schema)] in descending order."""
    for minimum, name in table:
        if version >= minimum:
            return name
    return default


def schema_for(method, path, version):
    """Return (schema name, 'body'|'query'|'path-name') or None."""
    seg = path.strip('/').split('/')
    if method == 'GET' and path.rstrip('/') == '/allocation_candidates':
        return 'allocation_candidate.' + pick(version, [
            ((1, 36), 'GET_SCHEMA_1_36'), ((1, 35), 'GET_SCHEMA_1_35'),
            ((1, 33), 'GET_SCHEMA_1_33'), ((1, 31), 'GET_SCHEMA_1_31'),
            ((1, 25), 'GET_SCHEMA_1_25'), ((1, 21), 'GET_SCHEMA_1_21'),
            ((1, 17), 'GET_SCHEMA_1_17'), ((1, 16), 'GET_SCHEMA_1_16'),
        ], 'GET_SCHEMA_1_10'), 'query'
    if method == 'GET' and path.rstrip('/') == '/resource_providers':
        return 'resource_provider.' + pick(version, [
            ((1, 18), 'GET_RPS_SCHEMA_1_18'), ((1, 14), 'GET_RPS_SCHEMA_1_14'),
            ((1, 4), 'GET_RPS_SCHEMA_1_4'), ((1, 3), 'GET_RPS_SCHEMA_1_3'),
        ], 'GET_RPS_SCHEMA_1_0'), 'query'
    if method == 'GET' and path.rstrip('/') == '/usages':
        name = 'GET_USAGES_SCHEMA_V1_38' if version >= (1, 38) \
            else 'GET_USAGES_SCHEMA_1_9'
        return 'usage.' + name, 'query'
    if method == 'GET' and path.rstrip('/') == '/traits':
        return 'trait.LIST_TRAIT_SCHEMA', 'query'
    if method == 'POST' and path.rstrip('/') == '/resource_providers':
        name = 'POST_RP_SCHEMA_V1_14' if version >= (1, 14) \
            else 'POST_RESOURCE_PROVIDER_SCHEMA'
        return 'resource_provider.' + name, 'body'
    if method == 'PUT' and len(seg) == 2 and seg[0] == 'resource_providers':
        name = 'PUT_RP_SCHEMA_V1_14' if version >= (1, 14) \
            else 'PUT_RESOURCE_PROVIDER_SCHEMA'
        return 'resource_provider.' + name, 'body'
    if method == 'PUT' and len(seg) == 3 and seg[2] == 'aggregates':
        name = 'PUT_AGGREGATES_SCHEMA_V1_19' if version >= (1, 19) \
            else 'PUT_AGGREGATES_SCHEMA_V1_1'
        return 'aggregate.' + name, 'body'
    if method == 'PUT' and len(seg) == 3 and seg[2] == 'traits':
        return 'trait.SET_TRAITS_FOR_RP_SCHEMA', 'body'
    if method == 'POST' and len(seg) == 3 and seg[2] == 'inventories':
        return 'inventory.POST_INVENTORY_SCHEMA', 'body'
    if method == 'PUT' and len(seg) == 3 and seg[2] == 'inventories':
        return 'inventory.PUT_INVENTORY_SCHEMA', 'body'
    if method == 'PUT' and len(seg) == 4 and seg[2] == 'inventories':
        return 'inventory.BASE_INVENTORY_SCHEMA', 'body'
    if method == 'PUT' and len(seg) == 2 and seg[0] == 'allocations':
        return 'allocation.' + pick(version, [
            ((1, 38), 'ALLOCATION_SCHEMA_V1_38'),
            ((1, 34), 'ALLOCATION_SCHEMA_V1_34'),
            ((1, 28), 'ALLOCATION_SCHEMA_V1_28'),
            ((1, 12), 'ALLOCATION_SCHEMA_V1_12'),
            ((1, 8), 'ALLOCATION_SCHEMA_V1_8'),
        ], 'ALLOCATION_SCHEMA'), 'body'
    if method == 'POST' and path.rstrip('/') == '/allocations':
        return 'allocation.' + pick(version, [
            ((1, 38), 'POST_ALLOCATIONS_V1_38'),
            ((1, 34), 'POST_ALLOCATIONS_V1_34'),
            ((1, 28), 'POST_ALLOCATIONS_V1_28'),
        ], 'POST_ALLOCATIONS_V1_13'), 'body'
    if method == 'POST' and path.rstrip('/') == '/reshaper':
        return 'reshaper.' + pick(version, [
            ((1, 38), 'POST_RESHAPER_SCHEMA_V1_38'),
            ((1, 34), 'POST_RESHAPER_SCHEMA_V1_34'),
        ], 'POST_RESHAPER_SCHEMA'), 'body'
    if method == 'POST' and path.rstrip('/') == '/resource_classes':
        return 'resource_class.POST_RC_SCHEMA_V1_2', 'body'
    if method == 'PUT' and len(seg) == 2 and seg[0] == 'resource_classes':
        if version >= (1, 7):
            # The handler validates '{"name": "<name from the URL>"}'.
            return 'resource_class.PUT_RC_SCHEMA_V1_2', 'path-name'
        return 'resource_class.PUT_RC_SCHEMA_V1_2', 'body'
    return None


def expectations(test):
    out = list(test.get('response_strings') or [])
    for path, value in (test.get('response_json_paths') or {}).items():
        if path == '$.errors[0].detail':
            out.append(value)
    return out


def cases(gabbits_dir):
    result = []
    for fname in sorted(os.listdir(gabbits_dir)):
        if not fname.endswith('.yaml'):
            continue
        with open(os.path.join(gabbits_dir, fname)) as f:
            doc = yaml.safe_load(f)
        defaults = doc.get('defaults') or {}
        for test in doc.get('tests') or []:
            if test.get('status') != 400 or (fname, test['name']) in NOT_SCHEMA:
                continue
            methods = [m for m in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')
                       if m in test]
            method = methods[0] if methods else test.get('method', 'GET')
            url = test[method] if methods else test.get('url')
            if not url or '$LAST_URL' in str(url) and method == 'GET':
                continue
            headers = dict(defaults.get('request_headers') or {})
            headers.update(test.get('request_headers') or {})
            version = parse_version(headers.get('openstack-api-version'))
            if version is None:
                continue
            url = substitute(str(url))
            if '$LAST_URL' in url:
                url = last_url_guess(doc, test, url)
                if url is None:
                    continue
            parsed = urllib.parse.urlsplit(url)
            found = schema_for(method, parsed.path, version)
            if found is None:
                continue
            schema, kind = found
            if kind == 'query':
                instance = {}
                for k, v in urllib.parse.parse_qsl(parsed.query,
                                                   keep_blank_values=True):
                    instance[k] = v
            elif kind == 'path-name':
                instance = {'name': parsed.path.rstrip('/').split('/')[-1]}
                kind = 'body'
            else:
                if 'data' not in test:
                    continue
                instance = substitute(test['data'])
            wanted = expectations(test)
            if not wanted:
                continue
            result.append({
                'file': fname,
                'test': test['name'],
                'version': '%d.%d' % version,
                'schema': schema,
                'kind': kind,
                'instance': instance,
                'expect': wanted,
            })
    return result


def last_url_guess(doc, test, url):
    """$LAST_URL: the URL of the previous test in the file (resolved)."""
    tests = doc.get('tests') or []
    index = tests.index(test)
    if index == 0:
        return None
    previous = tests[index - 1]
    methods = [m for m in ('GET', 'POST', 'PUT', 'DELETE', 'PATCH')
               if m in previous]
    previous_url = previous[methods[0]] if methods else previous.get('url')
    if not previous_url:
        return None
    previous_url = substitute(str(previous_url))
    if '$LAST_URL' in previous_url:
        previous_url = last_url_guess(doc, previous, previous_url)
        if previous_url is None:
            return None
    return url.replace('$LAST_URL', previous_url)


def detail(kind, text):
    prefix = ('JSON does not validate: ' if kind == 'body'
              else 'Invalid query string parameters: ')
    # webob's json formatter turns the detail's newlines into spaces.
    return (prefix + text).replace('\n', ' ')


def satisfied(expect, text):
    if len(expect) > 1 and expect.startswith('/') and expect.endswith('/'):
        return re.search(expect[1:-1], text) is not None
    return expect in text or expect in json.dumps(text)


def main():
    found = cases(sys.argv[1])
    sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
    import oracle
    kept = []
    for case in found:
        outcome = oracle.run(case)
        if outcome['text'] is None:
            continue  # valid instance: the 400 comes from somewhere else
        text = detail(case['kind'], outcome['text'])
        missing = [e for e in case['expect'] if not satisfied(e, text)]
        if missing:
            sys.stderr.write('not from schema validation or mis-built: %s | %s'
                             ' | %r\n' % (case['file'], case['test'], missing))
            continue
        kept.append(case)
    json.dump(kept, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write('\n')
    sys.stderr.write('%d cases\n' % len(kept))


if __name__ == '__main__':
    main()
