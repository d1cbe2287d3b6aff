#!/usr/bin/env python3
"""Differential oracle: run Python jsonschema the way Placement does.

Reads a JSON list of cases on stdin, each ``{"name": ..., "schema": NAME or
{...}, "instance": ...}``, and writes the same list with ``message``,
``text`` (``str(exc)``), ``keyword`` and ``path`` of the error that
``jsonschema.validate`` raises (``null`` when the instance is valid).

``schema`` as a string names an entry of data/placement-request-schemas.json.
The 'uuid' format checker mirrors placement/util.py (oslo's is_uuid_like).
Used to (re)generate tests/data/oracle-cases.json; needs the ``jsonschema``
package (4.x) importable. Not used by the build or the tests.
"""
import json
import os
import sys
import uuid

import jsonschema

HERE = os.path.dirname(os.path.abspath(__file__))
SCHEMAS = json.load(
    open(os.path.join(HERE, '..', 'data', 'placement-request-schemas.json'))
)['schemas']


def _format_uuid_string(string):
    return (string.replace('urn:', '').replace('uuid:', '')
            .strip('{}').replace('-', '').lower())


def is_uuid_like(val):
    try:
        return str(uuid.UUID(val)).replace('-', '') == _format_uuid_string(val)
    except (TypeError, ValueError, AttributeError):
        return False


def run(case):
    schema = case['schema']
    if isinstance(schema, str):
        schema = SCHEMAS[schema]
    checker = jsonschema.FormatChecker()
    checker.checks('uuid')(is_uuid_like)
    out = dict(case)
    try:
        jsonschema.validate(case['instance'], schema, format_checker=checker)
    except jsonschema.ValidationError as exc:
        out['message'] = exc.message
        out['text'] = str(exc)
        out['keyword'] = exc.validator
        out['path'] = list(exc.absolute_path)
    else:
        out['message'] = None
        out['text'] = None
        out['keyword'] = None
        out['path'] = None
    return out


def main():
    cases = json.load(sys.stdin)
    json.dump([run(c) for c in cases], sys.stdout, indent=1,
              ensure_ascii=False)
    sys.stdout.write('\n')


if __name__ == '__main__':
    main()
