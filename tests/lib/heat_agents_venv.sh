#!/usr/bin/env bash
# Idempotently create a virtualenv (outside the repository) holding the
# stock in-guest agents of Heat from PyPI: heat-cfntools (cfn-signal),
# os-collect-config (its heat collector) and heat-agents (heat-config's
# 55-heat-config, heat-config-notify and the script hook: diskimage-builder
# elements, which only heat-agents' source distribution holds; its wheel
# has none, so the sdist is fetched with pip and those three files copied
# to $VENV/heat-agents), for tests/integration/test_heat_identity.py,
# which runs them on this machine as "the instance".
#
# Location: ${KEELSON_AGENTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/keelson-heat-agents-venv}
set -euo pipefail

AGENTS_VERSION=13.0.0
REQUIREMENTS=("heat-cfntools==2.0.0" "os-collect-config==14.1.0" "heat-agents==$AGENTS_VERSION" "python-heatclient" "setuptools")
VENV="${KEELSON_AGENTS_VENV:-${XDG_CACHE_HOME:-$HOME/.cache}/keelson-heat-agents-venv}"
PYTHON="${PYTHON:-python3}"
STAMP="$VENV/.keelson-agents-$(printf '%s\n' "${REQUIREMENTS[@]}" | sha256sum | cut -c1-16)"

if [ -f "$STAMP" ] && [ -x "$VENV/bin/os-collect-config" ]; then
    exit 0
fi

mkdir -p "$(dirname "$VENV")"
exec 9>"$VENV.lock"
flock 9
if [ ! -f "$STAMP" ]; then
    [ -x "$VENV/bin/python" ] || "$PYTHON" -m venv "$VENV"
    "$VENV/bin/python" -m pip install --quiet --disable-pip-version-check "${REQUIREMENTS[@]}"
    "$VENV/bin/python" -c 'import os_collect_config.collect, heatclient.client, keystoneclient.v3.client' >/dev/null
    for tool in cfn-signal os-collect-config; do
        [ -x "$VENV/bin/$tool" ] || { echo "no $tool in $VENV" >&2; exit 1; }
    done
    SDIST="$(mktemp -d)"
    "$VENV/bin/python" -m pip download --quiet --disable-pip-version-check --no-deps --no-binary :all: \
        "heat-agents==$AGENTS_VERSION" -d "$SDIST"
    tar xzf "$SDIST/heat_agents-$AGENTS_VERSION.tar.gz" -C "$SDIST"
    SRC="$SDIST/heat_agents-$AGENTS_VERSION"
    mkdir -p "$VENV/heat-agents"
    cp "$SRC/heat-config/os-refresh-config/configure.d/55-heat-config" "$VENV/heat-agents/55-heat-config"
    cp "$SRC/heat-config/bin/heat-config-notify" "$VENV/heat-agents/heat-config-notify"
    cp "$SRC/heat-config-script/install.d/hook-script.py" "$VENV/heat-agents/hook-script.py"
    rm -rf "$SDIST"
    touch "$STAMP"
    echo "heat agents installed in $VENV" >&2
fi
