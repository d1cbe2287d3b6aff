#!/usr/bin/env python3
"""Checks one `helm template` rendering of charts/keelson.

    check_rendered.py LABEL RENDERED.yaml [--kube-version 1.27.0 ...]

- every manifest validates against the Kubernetes schemas (kubernetes-validate,
  strict: unknown fields are errors) for each --kube-version;
- the INI the chart renders (ConfigMap keelson.conf, the Secrets' database and
  Keystone fragments, the db-sync hook's copy, the per-pod node.conf fragments
  the init containers write) uses only options keelson declares (the registry
  `keelson options --json` prints, see registry.py), with values of the
  declared type;
- every keelson container runs a subcommand that services/keelson/src/cli.rs
  declares, finds its --config-file paths mounted, runs non-root on a
  read-only root filesystem without capabilities, has resource requests and
  limits, and (long-running ones) readiness and liveness probes: native gRPC
  probes on gRPC ports (TCP ones under mutual TLS, with the TLS material
  mounted), HTTP on the gateway;
- Services select rendered pods, the INI's endpoints name rendered Services
  and ports, the controller peers are the StatefulSet's stable names, and the
  db-sync Job is a pre-install/pre-upgrade hook.

Prints the rendered objects (kind/name), one line per check, and last a line
`counts PASSED FAILED`.
"""

import argparse
import base64
import configparser
import re
import sys
from pathlib import Path

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent))
import registry  # noqa: E402

CLI_RS = registry.ROOT / "services/keelson/src/cli.rs"

# keystoneauth's password plugin options, read by gateway/src/keystone.rs from
# [keystone_authtoken] but not declared in the registry (oslo.config registers
# them only when the plugin loads, so config-options.json does not list them).
# Allowed only in the Keystone Secret, and reported.
KEYSTONEAUTH_PASSWORD_OPTIONS = {
    "auth_url", "username", "password", "project_name", "project_id", "user_domain_name", "user_domain_id",
    "project_domain_name", "project_domain_id",
}

PASSED = 0
FAILED = 0


def check(ok, what, detail=""):
    global PASSED, FAILED
    if ok:
        PASSED += 1
        print(f"  ok    {what}")
    else:
        FAILED += 1
        print(f"  FAIL  {what}{': ' + detail if detail else ''}")
    return ok


# ---- the binary's command line -------------------------------------------------------

def kebab(name):
    return re.sub(r"(?<!^)(?=[A-Z])", "-", name).lower()


def cli_commands():
    """{enum name: {subcommand: variant}} from cli.rs, with clap's kebab-case
    names and #[command(name = "...")] overrides."""
    text = CLI_RS.read_text()
    enums = {}
    for m in re.finditer(r"pub enum (\w+) \{(.*?)\n\}", text, re.S):
        body, names, override = m.group(2), {}, None
        for line in body.splitlines():
            s = line.strip()
            o = re.match(r'#\[command\(name = "([^"]+)"\)\]', s)
            if o:
                override = o.group(1)
                continue
            v = re.match(r"([A-Z]\w*)\s*(?:[({,]|$)", s)
            if v and not s.startswith("#") and not s.startswith("//"):
                names[override or kebab(v.group(1))] = v.group(1)
                override = None
        enums[m.group(1)] = names
    return enums


def check_command(args, enums):
    """The keelson argv (without the binary) against cli.rs."""
    rest = list(args)
    while rest and rest[0] == "--config-file":
        rest = rest[2:]
    if not rest or rest[0] not in enums["Command"]:
        return f"unknown subcommand {rest[:1]}"
    cmd, rest = rest[0], rest[1:]
    if cmd == "db":
        if not rest or rest[0] not in enums["DbCommand"]:
            return f"unknown db subcommand {rest[:1]}"
    elif cmd == "status":
        if rest[:1] != ["upgrade"] or rest[1:2] != ["check"]:
            return f"expected status upgrade check, got {rest}"
    elif cmd == "ctl":
        while rest and rest[0].startswith("--"):
            if rest[0] != "--controllers":
                return f"unknown ctl option {rest[0]}"
            rest = rest[2:]
        if not rest or rest[0] not in enums["CtlCommand"]:
            return f"unknown ctl subcommand {rest[:1]}"
        text = CLI_RS.read_text()
        for flag in [a for a in rest[1:] if a.startswith("--")]:
            if not re.search(r"\b" + re.escape(flag[2:].replace("-", "_")) + r"\s*:", text):
                return f"unknown flag {flag}"
    elif rest:
        return f"unexpected arguments {rest}"
    return None


# ---- INI -----------------------------------------------------------------------------

def parse_ini(text):
    cp = configparser.RawConfigParser(strict=True, interpolation=None, delimiters=("=",), default_section="\0none")
    cp.optionxform = str
    cp.read_string(text)
    return {(g, k): v for g in cp.sections() for k, v in cp.items(g)}


def check_value(spec, value):
    kind = spec["type"]
    if kind == "int":
        return value.strip() == "" or re.fullmatch(r"-?\d+", value.strip()) is not None
    if kind == "bool":
        return value.strip().lower() in ("true", "false", "1", "0", "yes", "no", "on", "off")
    if kind == "float":
        try:
            float(value)
            return True
        except ValueError:
            return value.strip() == ""
    if spec.get("choices"):
        return value in spec["choices"]
    return True


def check_ini(what, text, reg, allowed_extra=frozenset(), notes=None):
    try:
        opts = parse_ini(text)
    except configparser.Error as e:
        return check(False, f"{what}: parses as INI", str(e))
    undeclared, bad = [], []
    for (group, name), value in sorted(opts.items()):
        spec = reg.get((group, name))
        if spec is None:
            if (group, name) in allowed_extra:
                if notes is not None:
                    notes.add(f"[{group}] {name}")
                continue
            undeclared.append(f"[{group}] {name}")
        elif not check_value(spec, value):
            bad.append(f"[{group}] {name} = {value!r} (not {spec['type']}{' of ' + str(spec['choices']) if spec.get('choices') else ''})")
    extra = sum(1 for k in opts if k in allowed_extra and k not in reg)
    check(not undeclared, f"{what}: {len(opts)} options, all declared"
          + (f" ({extra} keystoneauth plugin options allowed)" if extra else ""), ", ".join(undeclared))
    check(not bad, f"{what}: values of the declared types", "; ".join(bad))
    return opts


# ---- the manifests --------------------------------------------------------------------

def pod_spec(obj):
    kind = obj["kind"]
    if kind in ("Deployment", "StatefulSet", "Job"):
        return obj["spec"]["template"]["spec"], obj["spec"]["template"]["metadata"].get("labels", {})
    if kind == "Pod":
        return obj["spec"], obj["metadata"].get("labels", {})
    return None, None


def secret_data(obj):
    out = {k: base64.b64decode(v).decode() for k, v in (obj.get("data") or {}).items()}
    out.update(obj.get("stringData") or {})
    return out


def node_conf_from_init(container):
    """The INI an init container's printf writes to /run/keelson/node.conf,
    with the shell variables replaced by sample values."""
    script = " ".join(container.get("args", []))
    m = re.search(r"printf '([^']*)'", script)
    if not m:
        return None
    fmt = m.group(1).replace("\\n", "\n")
    return fmt.replace("%%", "%").replace("%s", "sample")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("label")
    ap.add_argument("rendered")
    ap.add_argument("--kube-version", action="append", default=[])
    ap.add_argument("--existing-secret", action="append", default=[],
                    help="Secret names the profile expects to exist already")
    a = ap.parse_args()

    docs = [d for d in yaml.safe_load_all(Path(a.rendered).read_text()) if d]
    print(f"rendered objects ({a.label}): {len(docs)}")
    for d in docs:
        hook = (d["metadata"].get("annotations") or {}).get("helm.sh/hook")
        print(f"  {d['kind']}/{d['metadata']['name']}{'  [hook: ' + hook + ']' if hook else ''}")

    # 1. Kubernetes schemas.
    import kubernetes_validate
    from kubernetes_validate import SchemaNotFoundError, ValidationError
    for version in a.kube_version or [kubernetes_validate.latest_version()]:
        errors, skipped = [], []
        for d in docs:
            try:
                kubernetes_validate.validate(d, version, strict=True)
            except SchemaNotFoundError:
                skipped.append(f"{d['kind']}/{d['metadata']['name']}")
            except ValidationError as e:
                errors.append(f"{d['kind']}/{d['metadata']['name']}: {e.message} at {'/'.join(map(str, e.path))}")
        check(not errors, f"{len(docs) - len(skipped)} manifests valid against Kubernetes {version} (strict)", "; ".join(errors))
        for s in skipped:
            # Only custom resources have no schema in kubernetes-validate.
            check(s.startswith("ServiceMonitor/"), f"{s}: custom resource, no core schema", "unexpected kind without schema")

    by_kind = {}
    for d in docs:
        by_kind.setdefault(d["kind"], {})[d["metadata"]["name"]] = d
    configmaps, secrets = by_kind.get("ConfigMap", {}), by_kind.get("Secret", {})
    services = by_kind.get("Service", {})
    reg = registry.registry()
    keystone_extra = {("keystone_authtoken", n) for n in KEYSTONEAUTH_PASSWORD_OPTIONS}
    notes = set()

    # 2. The rendered INI against the option registry.
    main_ini = None
    for name, cm in configmaps.items():
        if "keelson.conf" in (cm.get("data") or {}):
            main_ini = check_ini(f"ConfigMap/{name} keelson.conf", cm["data"]["keelson.conf"], reg)
    check(main_ini is not None, "a ConfigMap renders keelson.conf")
    mesh_tls = bool((main_ini or {}).get(("keelson", "tls_cert_file")))
    for name, s in secrets.items():
        for key, text in secret_data(s).items():
            if key.endswith(".conf"):
                extra = keystone_extra if "keystone" in key else frozenset()
                check_ini(f"Secret/{name} {key}", text, reg, extra, notes)
    for kind in ("Deployment", "StatefulSet"):
        for name, w in by_kind.get(kind, {}).items():
            for c in pod_spec(w)[0].get("initContainers", []):
                ini = node_conf_from_init(c)
                if ini is not None:
                    check_ini(f"{kind}/{name} node.conf (init container {c['name']})", ini, reg)
    for n in sorted(notes):
        print(f"  note  {n}: keystoneauth option read by the gateway, not declared in the registry")

    # 3. Workloads.
    enums = cli_commands()
    secret_names = set(secrets) | set(a.existing_secret)
    pod_labels = []
    for kind in ("Deployment", "StatefulSet", "Job", "Pod"):
        for name, w in by_kind.get(kind, {}).items():
            spec, labels = pod_spec(w)
            pod_labels.append(labels)
            psc = spec.get("securityContext") or {}
            long_running = kind in ("Deployment", "StatefulSet")
            volumes = {v["name"]: v for v in spec.get("volumes", [])}
            claim_templates = {t["metadata"]["name"] for t in w.get("spec", {}).get("volumeClaimTemplates", [])}
            for v in volumes.values():
                if "configMap" in v:
                    check(v["configMap"]["name"] in configmaps, f"{kind}/{name}: ConfigMap {v['configMap']['name']} rendered")
                if "secret" in v:
                    sn = v["secret"]["secretName"]
                    check(sn in secret_names, f"{kind}/{name}: Secret {sn} rendered or expected to exist")
            for c in spec.get("initContainers", []) + spec.get("containers", []):
                where = f"{kind}/{name}/{c['name']}"
                sc = c.get("securityContext") or {}
                check(sc.get("readOnlyRootFilesystem") is True and sc.get("allowPrivilegeEscalation") is False
                      and "ALL" in ((sc.get("capabilities") or {}).get("drop") or [])
                      and (sc.get("runAsNonRoot") or psc.get("runAsNonRoot")) is True
                      and (psc.get("runAsUser") or sc.get("runAsUser") or 0) != 0,
                      f"{where}: non-root, read-only root filesystem, no capabilities")
                res = c.get("resources") or {}
                check(all(k in (res.get("requests") or {}) and k in (res.get("limits") or {}) for k in ("cpu", "memory")),
                      f"{where}: cpu/memory requests and limits")
                for m in c.get("volumeMounts", []):
                    check(m["name"] in volumes or m["name"] in claim_templates, f"{where}: volume {m['name']} defined")
                if not c["image"].split(":")[0].endswith("keelson") or c.get("command"):
                    continue
                err = check_command(c.get("args", []), enums)
                check(err is None, f"{where}: `keelson {' '.join(x for x in c.get('args', []) if not x.startswith('/etc') and not x.startswith('/run') and x != '--config-file')}` is a cli.rs command", err or "")
                args = c.get("args", [])
                for i, arg in enumerate(args):
                    if arg == "--config-file":
                        path = args[i + 1]
                        check(any(path == m["mountPath"] or path.startswith(m["mountPath"].rstrip("/") + "/")
                                  for m in c.get("volumeMounts", [])), f"{where}: {path} mounted")
                if long_running and c in spec.get("containers", []):
                    rp, lp = c.get("readinessProbe"), c.get("livenessProbe")
                    check(rp is not None and lp is not None, f"{where}: readiness and liveness probes")
                    ports = {p.get("name"): p.get("containerPort") for p in c.get("ports", [])}
                    if "grpc" in ports and not mesh_tls:
                        check(all(p and (p.get("grpc") or {}).get("port") == ports["grpc"] for p in (rp, lp)),
                              f"{where}: native gRPC health probes on port {ports['grpc']}")
                    elif "grpc" in ports:
                        # The kubelet's gRPC probe has no client certificate.
                        check(all(p and (p.get("tcpSocket") or {}).get("port") == ports["grpc"] for p in (rp, lp)),
                              f"{where}: TCP probes on mutual-TLS port {ports['grpc']}")
                    if mesh_tls:
                        tls_files = [main_ini[("keelson", o)] for o in ("tls_cert_file", "tls_key_file", "tls_ca_file")]
                        check(all(any(f.startswith(m["mountPath"].rstrip("/") + "/") for m in c.get("volumeMounts", []))
                                  for f in tls_files), f"{where}: TLS material mounted")
                    if "placement" in ports:
                        check(all(p and "httpGet" in p for p in (rp, lp)), f"{where}: HTTP probes")
                    mounts = {m["mountPath"] for m in c.get("volumeMounts", [])}
                    check({"/tmp", "/var/lib/keelson"} <= mounts, f"{where}: writable /tmp and data dir mounted")

    # 4. Services select pods; the INI's endpoints name Services.
    for name, svc in services.items():
        sel = svc["spec"].get("selector") or {}
        check(any(all(l.get(k) == v for k, v in sel.items()) for l in pod_labels), f"Service/{name} selects rendered pods")
    if main_ini:
        for key in (("keelson", "inventory_endpoint"), ("keelson", "candidates_endpoint"), ("keelson", "engine_endpoints")):
            for url in main_ini.get(key, "").split(","):
                m = re.fullmatch(r"http://([^:/]+):(\d+)", url.strip())
                ok = bool(m) and m.group(1) in services and any(
                    p["port"] == int(m.group(2)) for p in services[m.group(1)]["spec"]["ports"])
                check(ok, f"[{key[0]}] {key[1]} {url} is a rendered Service port")
        for key, svc_name in ((("keelson", "placement_listen"), "placement"), (("keelson", "orchestration_listen"), "orchestration")):
            port = int(main_ini[key].rsplit(":", 1)[1])
            check(any(p.get("name") == svc_name and p["port"] == port for s in services.values() for p in s["spec"]["ports"]),
                  f"[{key[0]}] {key[1]} port {port} exposed by the gateway Service")

    # 5. The controllers.
    sts = {n: s for n, s in by_kind.get("StatefulSet", {}).items() if n.endswith("-controller")}
    if check(len(sts) == 1, "one controller StatefulSet"):
        name, s = next(iter(sts.items()))
        replicas = s["spec"]["replicas"]
        headless = services.get(s["spec"]["serviceName"])
        check(headless is not None and headless["spec"].get("clusterIP") == "None"
              and headless["spec"].get("publishNotReadyAddresses") is True,
              f"StatefulSet/{name}: headless Service {s['spec']['serviceName']} publishes not-ready peers")
        ns = "default"
        expect = [f"{name}-{i}={name}-{i}.{s['spec']['serviceName']}.{ns}.svc.cluster.local:" for i in range(replicas)]
        peers = [p.strip() for p in (main_ini or {}).get(("controller", "peers"), "").split(",") if p.strip()]
        check(len(peers) == replicas and all(p.startswith(e) for p, e in zip(peers, expect)),
              f"[controller] peers are the {replicas} stable pod names", str(peers))
        pdbs = [p for p in by_kind.get("PodDisruptionBudget", {}).values()
                if p["spec"]["selector"]["matchLabels"].items() <= s["spec"]["selector"]["matchLabels"].items()]
        check(len(pdbs) == 1, f"StatefulSet/{name}: a PodDisruptionBudget")
        if replicas > 1:
            check(bool((main_ini or {}).get(("etcd", "endpoints"))), "[etcd] endpoints set for several controllers")

    # 6. The db sync hook.
    jobs = by_kind.get("Job", {})
    sync = [j for j in jobs.values() if "sync" in (j["spec"]["template"]["spec"]["containers"][0].get("args") or [])]
    if check(len(sync) == 1, "one `keelson db sync` Job"):
        ann = sync[0]["metadata"].get("annotations") or {}
        check(set(ann.get("helm.sh/hook", "").split(",")) == {"pre-install", "pre-upgrade"},
              "db sync Job is a pre-install,pre-upgrade hook")
        vols = sync[0]["spec"]["template"]["spec"]["volumes"]
        for v in vols:
            if "secret" in v and v["secret"]["secretName"] in secrets:
                sec = secrets[v["secret"]["secretName"]]
                sann = sec["metadata"].get("annotations") or {}
                check(sann.get("helm.sh/hook") == ann.get("helm.sh/hook")
                      and int(sann.get("helm.sh/hook-weight", 0)) < int(ann.get("helm.sh/hook-weight", 0)),
                      f"Secret/{v['secret']['secretName']} used by the hook exists before it (hook, lower weight)")

    # 7. NetworkPolicies cover every workload.
    if by_kind.get("NetworkPolicy"):
        selected = [np["spec"]["podSelector"].get("matchLabels", {}) for np in by_kind["NetworkPolicy"].values()]
        for kind in ("Deployment", "StatefulSet"):
            for name, w in by_kind.get(kind, {}).items():
                labels = pod_spec(w)[1]
                check(any(sel.items() <= labels.items() for sel in selected), f"{kind}/{name}: a NetworkPolicy selects it")

    print(f"counts {PASSED} {FAILED}")
    return 0 if FAILED == 0 else 1


if __name__ == "__main__":
    sys.exit(main())
