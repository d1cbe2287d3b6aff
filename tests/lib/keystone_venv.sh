#!/usr/bin/env bash
# Idempotently create a virtualenv (outside the repository) holding a real
# OpenStack Keystone from PyPI, served by cheroot for
# tests/integration/test_keystone.py.
#
# Location: ${KEELSON_KEYSTONE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/keelson-keystone-venv}
set -euo pipefail

KEYSTONE_VERSION="${KEYSTONE_VERSION:-30.0.0}"
VENV="${KEELSON_KEYSTONE_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/keelson-keystone-venv}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.keelson-keystone-$KEYSTONE_VERSION"

if [ -f "$STAMP" ] && [ -x "$VENV/bin/python" ]; then
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
if [ ! -x "$VENV/bin/python" ]; then
    "$PYTHON" -m venv "$VENV"
fi
"$VENV/bin/python" -m pip install --quiet --upgrade pip
"$VENV/bin/python" -m pip install --quiet "keystone==$KEYSTONE_VERSION" cheroot
"$VENV/bin/python" -c 'import keystone.server.wsgi, cheroot.wsgi' >/dev/null
touch "$STAMP"
echo "keystone $KEYSTONE_VERSION installed in $VENV"
