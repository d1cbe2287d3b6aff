"""keelson's option registry as the binary assembles it: Placement's options
(services/common/runtime/data/config-options.json) plus every crate's typed
declarations, read from `keelson options --json`.

The binary is $KEELSON_BIN when set, else `cargo run -q -p keelson`."""

import json
import os
import subprocess
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def options_json():
    """The rows `keelson options --json` prints: group, name, type, default,
    choices, help."""
    binary = os.environ.get("KEELSON_BIN")
    command = [binary] if binary else ["cargo", "run", "-q", "-p", "keelson", "--"]
    out = subprocess.run(command + ["options", "--json"], cwd=ROOT, check=True, capture_output=True, text=True)
    return json.loads(out.stdout)


def registry():
    """{(group, name): {"type": kind, "choices": [...] or None}}"""
    return {(o["group"], o["name"]): {"type": o["type"], "choices": o["choices"] or None} for o in options_json()}
