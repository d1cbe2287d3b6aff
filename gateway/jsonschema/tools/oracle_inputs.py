#!/usr/bin/env python3
"""Build the inputs of tests/data/oracle-cases.json.

Usage:
  oracle_inputs.py tests/data/gabbi-cases.json | oracle.py > tests/data/oracle-cases.json

Three groups of cases, each ``{"name", "schema", "instance"}``:

* every instance of the gabbi table (so the exact text is pinned, not only
  the substrings the gabbi tests look for);
* hand-written cases per keyword, per message variant and per best-match
  rule, plus values that stress Python's repr and pprint;
* seeded random mutations of valid Placement requests (wrong types, missing
  and extra keys, out-of-range numbers, odd strings) for every schema.
"""
import copy
import json
import random
import sys
import uuid

U1 = 'f918801a-5e54-4bee-9095-09a9d0c786b8'
U2 = 'a893eb5c-e2a0-4251-ab26-f71d3b0cfc0b'
U3 = '4e061c03-611e-4caa-bf26-999dcff4284e'

KEYWORD_CASES = [
    # type
    ('type string', {'type': 'string'}, 5),
    ('type integer rejects float', {'type': 'integer'}, 1.5),
    ('type integer accepts 1.0', {'type': 'integer'}, 1.0),
    ('type integer rejects bool', {'type': 'integer'}, True),
    ('type number rejects bool', {'type': 'number'}, False),
    ('type list', {'type': ['integer', 'null']}, 'x'),
    ('type list single', {'type': ['string']}, None),
    ('type object', {'type': 'object'}, [1, 2]),
    ('type array', {'type': 'array'}, {'a': 1}),
    ('type boolean', {'type': 'boolean'}, 0),
    ('type null', {'type': 'null'}, ''),
    # enum / const
    ('enum', {'enum': ['none', 'isolate']}, 'bogus'),
    ('enum numbers', {'enum': [1, 2.5, None, True]}, 3),
    ('enum 1 == 1.0', {'enum': [1]}, 1.0),
    ('enum bool is not int', {'enum': [1]}, True),
    ('const', {'const': 'x'}, 'y'),
    ('const object', {'const': {'a': [1, 2]}}, {'a': [1, 3]}),
    # object keywords
    ('required one', {'required': ['name']}, {}),
    ('required several', {'required': ['b', 'a', 'c']}, {'a': 1}),
    ('required ignores non-objects', {'required': ['a']}, 'str'),
    ('additional one', {'properties': {'a': {}}, 'additionalProperties': False},
     {'a': 1, 'foo': 2}),
    ('additional plural sorted',
     {'properties': {'a': {}}, 'additionalProperties': False},
     {'zeta': 1, 'a': 1, 'beta': 2, 'Alpha': 3}),
    ('additional with patterns',
     {'patternProperties': {'^b': {}, '^a': {}}, 'additionalProperties': False},
     {'c': 1}),
    ('additional with patterns plural',
     {'patternProperties': {'^x$': {}}, 'additionalProperties': False},
     {'d': 1, 'c': 2, 'x': 3}),
    ('additional with empty patterns',
     {'patternProperties': {}, 'additionalProperties': False}, {'c': 1}),
    ('additional schema',
     {'properties': {'a': {}}, 'additionalProperties': {'type': 'integer'}},
     {'a': 'x', 'b': 'y'}),
    ('properties nested path',
     {'properties': {'a': {'properties': {'b': {'minimum': 3}}}}},
     {'a': {'b': 1}}),
    ('patternProperties path',
     {'patternProperties': {'^[A-Z]+$': {'type': 'integer'}}}, {'VCPU': 'x'}),
    ('patternProperties dollar newline',
     {'patternProperties': {'^[A-Z]+$': {'type': 'integer'}},
      'additionalProperties': False}, {'VCPU\n': 1, 'vcpu': 2}),
    ('minProperties 1', {'minProperties': 1}, {}),
    ('minProperties 2', {'minProperties': 2}, {'a': 1}),
    ('maxProperties 0', {'maxProperties': 0}, {'a': 1}),
    ('maxProperties 1', {'maxProperties': 1}, {'a': 1, 'b': 2}),
    ('propertyNames', {'propertyNames': {'maxLength': 2}}, {'ab': 1, 'abc': 2}),
    ('dependentRequired', {'dependentRequired': {'a': ['b', 'c']}}, {'a': 1, 'c': 1}),
    ('dependentSchemas', {'dependentSchemas': {'a': {'required': ['z']}}}, {'a': 1}),
    # array keywords
    ('items schema', {'items': {'type': 'string'}}, ['a', 1, 'b', 2]),
    ('items false one extra', {'prefixItems': [{}], 'items': False}, [1, 2]),
    ('items false extras', {'prefixItems': [{}, {}], 'items': False}, [1, 2, 3, 4]),
    ('items false no prefix', {'items': False}, [1]),
    ('prefixItems', {'prefixItems': [{'type': 'string'}, {'type': 'integer'}]}, [1, 'x']),
    ('contains none', {'contains': {'type': 'string'}}, [1, 2]),
    ('contains too few', {'contains': {'type': 'string'}, 'minContains': 2}, ['a', 1]),
    ('contains too many', {'contains': {'type': 'string'}, 'maxContains': 1}, ['a', 'b']),
    ('minItems 1', {'minItems': 1}, []),
    ('minItems 3', {'minItems': 3}, [1, 2]),
    ('maxItems 0', {'maxItems': 0}, [1]),
    ('maxItems 1', {'maxItems': 1}, [1, 2]),
    ('uniqueItems', {'uniqueItems': True}, ['a', 'b', 'a']),
    ('uniqueItems 1 and 1.0', {'uniqueItems': True}, [1, 1.0]),
    ('uniqueItems true and 1 differ', {'uniqueItems': True}, [1, True, [1], [True]]),
    ('uniqueItems dict order', {'uniqueItems': True}, [{'a': 1, 'b': 2}, {'b': 2, 'a': 1}]),
    # strings
    ('pattern', {'pattern': '^[A-Z0-9_]+$'}, 'instance'),
    ('pattern search not match', {'pattern': 'b'}, 'abc'),
    ('pattern trailing newline allowed', {'pattern': '^[A-Z]+$'}, 'ABC\n'),
    ('pattern ignores non-strings', {'pattern': '^a$'}, 5),
    ('minLength 1', {'minLength': 1}, ''),
    ('minLength 3', {'minLength': 3}, 'ab'),
    ('minLength counts code points', {'minLength': 3}, 'é中'),
    ('maxLength 0', {'maxLength': 0}, 'a'),
    ('maxLength 2', {'maxLength': 2}, 'abc'),
    ('maxLength code points ok', {'maxLength': 2}, 'é中'),
    # format
    ('format uuid', {'format': 'uuid'}, 'harry'),
    ('format uuid no dashes', {'format': 'uuid'}, U1.replace('-', '')),
    ('format uuid braces', {'format': 'uuid'}, '{%s}' % U1),
    ('format uuid urn', {'format': 'uuid'}, 'urn:uuid:%s' % U1),
    ('format uuid upper', {'format': 'uuid'}, U1.upper()),
    ('format uuid odd dashes', {'format': 'uuid'}, U1.replace('-', '') + '--'),
    ('format uuid 0x', {'format': 'uuid'}, '0x' + U1.replace('-', '')[2:]),
    ('format uuid int', {'format': 'uuid'}, 5),
    ('format uuid null', {'format': 'uuid'}, None),
    ('format without checker', {'format': 'no-such-format'}, 'nope'),
    # numbers
    ('minimum', {'minimum': 1}, 0),
    ('minimum float', {'minimum': 1.5}, 1),
    ('minimum negative', {'minimum': 1}, -1),
    ('minimum float instance', {'minimum': 1}, 0.5),
    ('maximum', {'maximum': 2147483647}, 2147483648),
    ('maximum float', {'maximum': 3.40282e+38}, 3.40282e+39),
    ('maximum tiny float', {'maximum': 0.0001}, 0.001),
    ('maximum exponent repr', {'maximum': 1e-05}, 1.5e-05),
    ('exclusiveMinimum', {'exclusiveMinimum': 1}, 1),
    ('exclusiveMaximum', {'exclusiveMaximum': 1}, 1.0),
    ('multipleOf int', {'multipleOf': 2}, 7),
    ('multipleOf float', {'multipleOf': 0.5}, 1.25),
    ('multipleOf float ok', {'multipleOf': 0.5}, 1.5),
    ('multipleOf int float instance', {'multipleOf': 2}, 3.0),
    # combinators
    ('allOf', {'allOf': [{'type': 'string'}, {'minLength': 5}]}, 'abc'),
    ('anyOf descends to type match',
     {'anyOf': [{'type': 'string', 'format': 'uuid'}, {'type': 'null'}]}, 'abc'),
    ('anyOf ties report parent', {'anyOf': [{'type': 'string'}, {'type': 'null'}]}, 5),
    ('anyOf deeper wins',
     {'anyOf': [{'type': 'object', 'properties': {'a': {'type': 'string'}}},
                {'type': 'object', 'required': ['b']}]}, {'a': 1}),
    ('oneOf none', {'oneOf': [{'type': 'string'}, {'type': 'integer', 'minimum': 3}]}, 1),
    ('oneOf several', {'oneOf': [{'type': 'integer'}, {'minimum': 0}, {'maximum': 9}]}, 5),
    ('not', {'not': {'type': 'string'}}, 'x'),
    ('not nested repr', {'not': {'enum': [True, None, 1.0]}}, None),
    ('if then', {'if': {'type': 'string'}, 'then': {'minLength': 3}}, 'ab'),
    ('if else', {'if': {'type': 'string'}, 'then': {'minLength': 3},
                 'else': {'minimum': 3}}, 1),
    ('ref definitions',
     {'definitions': {'pos': {'type': 'integer', 'minimum': 1}},
      'properties': {'a': {'$ref': '#/definitions/pos'}}}, {'a': 0}),
    ('ref defs with sibling',
     {'$defs': {'s': {'type': 'string'}},
      'properties': {'a': {'$ref': '#/$defs/s', 'maxLength': 1}}}, {'a': 5}),
    ('ref recursive',
     {'type': 'object', 'properties': {'next': {'$ref': '#'}, 'v': {'type': 'integer'}}},
     {'next': {'next': {'v': 'x'}}}),
    ('false subschema', {'properties': {'a': False}}, {'a': 1}),
    ('false root', False, {'a': 1}),
    ('true root', True, {'a': 1}),
    ('unknown keywords ignored', {'foo': 1, '$schema': 'whatever', 'type': 'string'}, 1),
    # best match
    ('shallow beats deep',
     {'properties': {'a': {'properties': {'b': {'type': 'string'}}}}, 'required': ['z']},
     {'a': {'b': 1}}),
    ('greater sibling path wins',
     {'properties': {'a': {'type': 'string'}, 'b': {'type': 'string'}}},
     {'a': 1, 'b': 2}),
    ('same path first keyword wins', {'type': 'string', 'format': 'uuid'}, 7),
    ('same path first keyword wins 2', {'minLength': 5, 'pattern': '^x'}, 'abc'),
    ('index paths', {'items': {'type': 'string'}}, [1, 'a', 2]),
    ('type mismatch preferred in allOf',
     {'allOf': [{'type': 'string', 'minLength': 3}, {'minimum': 5}]}, 1),
    # repr / pprint
    ('repr quotes', {'type': 'integer'}, "it's"),
    ('repr both quotes', {'type': 'integer'}, 'it\'s "q"'),
    ('repr escapes', {'type': 'integer'}, 'a\\b\n\t\r\x07\x7f\xa0\u200b é 中 😀'),
    ('repr nested', {'type': 'string'}, {'a': [1, 2.0, None, True, {'b': 'c'}], 'd': {}}),
    ('repr floats', {'type': 'string'}, [0.1, 1e16, 1e-05, 123.456, -0.0, 1e+100, 2.5e-08]),
    ('pprint long string', {'maxLength': 10}, 'word ' * 40),
    ('pprint long string newlines', {'maxLength': 10}, 'line one\nline two ' + 'x' * 80 + '\nend'),
    ('pprint long list', {'maxItems': 1}, [U1, U2, U3, U1 + U2]),
    ('pprint wide dict', {'maxProperties': 1},
     {'alpha': 'a' * 30, 'beta': ['b' * 30, 'c' * 30], 'gamma': {'delta': 'd' * 60}}),
    ('pprint long key', {'maxProperties': 0}, {'k' * 80: 'v'}),
    ('pprint deep', {'type': 'string'},
     {'a': {'b': {'c': {'d': {'e': ['x' * 20, 'y' * 20, 'z' * 20]}}}}}),
]

PLACEMENT_VALID = {
    'aggregate.PUT_AGGREGATES_SCHEMA_V1_1': [U1, U2],
    'aggregate.PUT_AGGREGATES_SCHEMA_V1_19': {
        'aggregates': [U1, U2], 'resource_provider_generation': 3},
    'allocation.ALLOCATION_SCHEMA': {'allocations': [
        {'resource_provider': {'uuid': U1}, 'resources': {'DISK_GB': 10}}]},
    'allocation.ALLOCATION_SCHEMA_V1_8': {
        'allocations': [{'resource_provider': {'uuid': U1},
                         'resources': {'DISK_GB': 10, 'VCPU': 1}}],
        'project_id': U2, 'user_id': U3},
    'allocation.ALLOCATION_SCHEMA_V1_12': {
        'allocations': {U1: {'resources': {'DISK_GB': 10}, 'generation': 1}},
        'project_id': U2, 'user_id': U3},
    'allocation.ALLOCATION_SCHEMA_V1_28': {
        'allocations': {U1: {'resources': {'DISK_GB': 10}}},
        'project_id': U2, 'user_id': U3, 'consumer_generation': None},
    'allocation.ALLOCATION_SCHEMA_V1_34': {
        'allocations': {U1: {'resources': {'DISK_GB': 10}}},
        'project_id': U2, 'user_id': U3, 'consumer_generation': 1,
        'mappings': {'compute': [U1]}},
    'allocation.ALLOCATION_SCHEMA_V1_38': {
        'allocations': {U1: {'resources': {'DISK_GB': 10}}},
        'project_id': U2, 'user_id': U3, 'consumer_generation': 1,
        'consumer_type': 'INSTANCE'},
    'allocation.POST_ALLOCATIONS_V1_13': {U3: {
        'allocations': {U1: {'resources': {'VCPU': 1}}},
        'project_id': U2, 'user_id': U2}},
    'allocation.POST_ALLOCATIONS_V1_38': {U3: {
        'allocations': {U1: {'resources': {'VCPU': 1}}},
        'project_id': U2, 'user_id': U2, 'consumer_generation': None,
        'consumer_type': 'MIGRATION'}},
    'allocation_candidate.GET_SCHEMA_1_36': {
        'resources': 'VCPU:1', 'limit': '5', 'group_policy': 'none',
        'required1': 'HW_CPU_X86_AVX', 'same_subtree': '_a,_b'},
    'inventory.POST_INVENTORY_SCHEMA': {
        'resource_class': 'DISK_GB', 'total': 2048, 'reserved': 512,
        'min_unit': 1, 'max_unit': 1024, 'step_size': 1, 'allocation_ratio': 1.5},
    'inventory.PUT_INVENTORY_SCHEMA': {
        'resource_provider_generation': 1,
        'inventories': {'DISK_GB': {'total': 10, 'reserved': 1}}},
    'inventory.BASE_INVENTORY_SCHEMA': {
        'resource_provider_generation': 1, 'total': 10, 'allocation_ratio': 2.0},
    'reshaper.POST_RESHAPER_SCHEMA_V1_38': {
        'inventories': {U1: {'resource_provider_generation': 1,
                             'inventories': {'VCPU': {'total': 8}}}},
        'allocations': {U2: {'allocations': {U1: {'resources': {'VCPU': 1}}},
                             'project_id': U3, 'user_id': U3,
                             'consumer_generation': None,
                             'consumer_type': 'INSTANCE'}}},
    'resource_class.POST_RC_SCHEMA_V1_2': {'name': 'CUSTOM_GOLD'},
    'resource_provider.GET_RPS_SCHEMA_1_18': {
        'name': 'rp', 'uuid': U1, 'member_of': 'in:' + U2, 'resources': 'VCPU:1',
        'in_tree': U3, 'required': 'HW_CPU_X86_AVX'},
    'resource_provider.POST_RP_SCHEMA_V1_14': {
        'name': 'rp', 'uuid': U1, 'parent_provider_uuid': U2},
    'resource_provider.PUT_RP_SCHEMA_V1_14': {'name': 'rp', 'parent_provider_uuid': None},
    'trait.PUT_TRAITS_SCHEMA': {'traits': ['CUSTOM_A', 'CUSTOM_B']},
    'trait.SET_TRAITS_FOR_RP_SCHEMA': {'traits': ['HW_CPU_X86_AVX'],
                                       'resource_provider_generation': 0},
    'trait.LIST_TRAIT_SCHEMA': {'name': 'startswith:CUSTOM', 'associated': 'true'},
    'usage.GET_USAGES_SCHEMA_V1_38': {'project_id': U1, 'user_id': U2,
                                      'consumer_type': 'all'},
    'trait.CUSTOM_TRAIT': 'CUSTOM_TRAIT_1',
}

ODD_VALUES = [None, True, False, 0, -1, 1.0, 2.5, 2147483648, '', 'x', 'vcpu',
              'CUSTOM_\u00e9', 'a' * 300, [], ['x'], [U1, U1], {}, {'k': 'v'},
              U1.replace('-', ''), 'not-a-uuid', 3.40282e+39, '0', '-5',
              "it's", 'RESHAPED\n']


def paths(value, prefix=()):
    yield prefix
    if isinstance(value, dict):
        for k, v in value.items():
            yield from paths(v, prefix + (k,))
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from paths(v, prefix + (i,))


def get(value, path):
    for step in path:
        value = value[step]
    return value


def mutate(rng, valid):
    value = copy.deepcopy(valid)
    for _ in range(rng.choice([1, 1, 1, 2, 3])):
        all_paths = list(paths(value))
        path = rng.choice(all_paths)
        action = rng.choice(['replace', 'replace', 'delete', 'add', 'rename'])
        if not path:
            if action == 'replace':
                value = rng.choice(ODD_VALUES)
            continue
        parent = get(value, path[:-1])
        key = path[-1]
        if action == 'replace':
            parent[key] = copy.deepcopy(rng.choice(ODD_VALUES))
        elif action == 'delete':
            del parent[key]
        elif action == 'add' and isinstance(parent, dict):
            parent[rng.choice(['bad_field', 'x', 'ZZ', 'generation', U3])] = \
                copy.deepcopy(rng.choice(ODD_VALUES))
        elif action == 'add' and isinstance(parent, list):
            parent.append(copy.deepcopy(rng.choice(ODD_VALUES)))
        elif action == 'rename' and isinstance(parent, dict):
            parent[rng.choice(['renamed', 'lower_case', key + '1'])] = parent.pop(key)
    return value


def main():
    cases = []
    for case in json.load(open(sys.argv[1])):
        cases.append({'name': 'gabbi: %s | %s' % (case['file'], case['test']),
                      'schema': case['schema'], 'instance': case['instance']})
    for name, schema, instance in KEYWORD_CASES:
        cases.append({'name': name, 'schema': schema, 'instance': instance})
    rng = random.Random(20240611)
    seen = set()
    for schema_name, valid in PLACEMENT_VALID.items():
        cases.append({'name': 'valid: ' + schema_name, 'schema': schema_name,
                      'instance': valid})
        produced = 0
        attempts = 0
        while produced < 12 and attempts < 200:
            attempts += 1
            instance = mutate(rng, valid)
            key = (schema_name, json.dumps(instance, sort_keys=False))
            if key in seen:
                continue
            seen.add(key)
            produced += 1
            cases.append({'name': 'mutation %d: %s' % (produced, schema_name),
                          'schema': schema_name, 'instance': instance})
    json.dump(cases, sys.stdout, indent=1, ensure_ascii=False)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
