"""keelson's option registry, read the way services/common/runtime/src/config.rs
builds it: Placement's options from services/common/runtime/data/config-options.json
plus keelson's own KEELSON_OPTIONS table from config.rs."""

import json
import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
CONTRACT = ROOT / "services/common/runtime/data/config-options.json"
CONFIG_RS = ROOT / "services/common/runtime/src/config.rs"

# One row of the KEELSON_OPTIONS table: ("group", "name", "type", default),
ROW = re.compile(r'\(\s*"([A-Za-z0-9_]+)"\s*,\s*"([A-Za-z0-9_]+)"\s*,\s*"([a-z]+)"\s*,\s*(None|Some\("(?:[^"\\]|\\.)*"\))\s*\)')


def _contract_type(t):
    for prefix, kind in (("IntOpt", "int"), ("PortOpt", "int"), ("BoolOpt", "bool"), ("FloatOpt", "float"),
                         ("ListOpt", "list"), ("MultiStrOpt", "multistr")):
        if t.startswith(prefix):
            return kind
    return "str"


def keelson_options(text=None):
    """(group, name, type) rows of KEELSON_OPTIONS in config.rs."""
    text = CONFIG_RS.read_text() if text is None else text
    start = text.index("const KEELSON_OPTIONS")
    body = text[start:text.index("];", start)]
    # Drop comment lines so that a commented-out row does not count (a
    # default such as "http://…" holds "//" too, so whole lines only).
    body = "\n".join(line for line in body.splitlines() if not line.lstrip().startswith("//"))
    rows = [(g, n, t) for g, n, t, _ in ROW.findall(body)]
    if not rows:
        raise SystemExit(f"no KEELSON_OPTIONS rows found in {CONFIG_RS}")
    return rows


def registry():
    """{(group, name): {"type": kind, "choices": [...] or None}}"""
    out = {}
    for o in json.loads(CONTRACT.read_text())["options"]:
        choices = [c for c in (o.get("choices") or []) if isinstance(c, str)] or None
        out[(o["group"], o["name"])] = {"type": _contract_type(o["type"]), "choices": choices}
    for g, n, t in keelson_options():
        out[(g, n)] = {"type": t, "choices": None}
    # As build_registry() does: the orchestration twin of auth_strategy.
    out[("orchestration", "auth_strategy")]["choices"] = ["keystone", "noauth"]
    return out
