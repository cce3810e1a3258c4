#!/usr/bin/env python3
"""Offline checks of Tally's manifests (driven by validate.sh).

Usage: validate.py REPO_ROOT [RENDERED_BASE.yaml [RENDERED_KIND.yaml]]

Without rendered kustomize output the objects are collected from the
kustomization trees directly (generators are checked for their files only).
Every problem is printed as `FAIL <where>: <what>`; exit status 1 if any.
"""
import json
import os
import re
import sys

import yaml

ROOT = sys.argv[1]
RENDERED = sys.argv[2] if len(sys.argv) > 2 and sys.argv[2] else None
RENDERED_KIND = sys.argv[3] if len(sys.argv) > 3 and sys.argv[3] else None
MANIFESTS = os.path.join(ROOT, "manifests")
problems = []
checks = 0


def fail(where, what):
    problems.append(f"FAIL {where}: {what}")


def check(cond, where, what):
    global checks
    checks += 1
    if not cond:
        fail(where, what)
    return cond


def rel(path):
    return os.path.relpath(path, ROOT)


def load_all(path):
    with open(path, encoding="utf-8") as f:
        return [d for d in yaml.safe_load_all(f) if d is not None]


# 1. Every YAML file we own parses.
yaml_files = []
for top in ("manifests", os.path.join("e2e", "kind")):
    for dirpath, _, files in os.walk(os.path.join(ROOT, top)):
        if ".state" in dirpath.split(os.sep):
            continue
        for name in sorted(files):
            if name.endswith((".yaml", ".yml")):
                yaml_files.append(os.path.join(dirpath, name))
for path in yaml_files:
    try:
        load_all(path)
        check(True, rel(path), "")
    except yaml.YAMLError as e:
        fail(rel(path), f"YAML does not parse: {e}")


# 2. Kustomization trees: every resource and generator file exists; collect objects.
def walk_kustomization(directory, seen, objects):
    kfile = os.path.join(directory, "kustomization.yaml")
    if not check(os.path.isfile(kfile), rel(directory), "no kustomization.yaml"):
        return
    if directory in seen:
        return
    seen.add(directory)
    try:
        k = load_all(kfile)[0]
    except (yaml.YAMLError, IndexError) as e:
        fail(rel(kfile), f"unreadable: {e}")
        return
    check(k.get("kind") == "Kustomization", rel(kfile), "kind is not Kustomization")
    for res in k.get("resources", []):
        path = os.path.normpath(os.path.join(directory, res))
        if os.path.isdir(path):
            walk_kustomization(path, seen, objects)
        elif check(os.path.isfile(path), rel(kfile), f"resource {res} does not exist"):
            try:
                objects.extend(load_all(path))
            except yaml.YAMLError:
                pass  # reported in step 1
    for gen in k.get("configMapGenerator", []) + k.get("secretGenerator", []):
        for entry in gen.get("files", []):
            src = entry.split("=", 1)[-1]
            check(os.path.isfile(os.path.join(directory, src)), rel(kfile),
                  f"generator {gen.get('name')} file {src} does not exist")
            if src.endswith(".yaml") and os.path.isfile(os.path.join(directory, src)):
                objects.append({"apiVersion": "v1", "kind": "ConfigMap",
                                "metadata": {"name": gen["name"], "namespace": gen.get("namespace")},
                                "data": {entry.split("=", 1)[0]: open(os.path.join(directory, src)).read()}})


# The checks below read the complete set: the base (every webhook in it is
# served; a draft would be walked here too, and the base must leave it out).
base_objects = []
walk_kustomization(MANIFESTS, set(), base_objects)
raw_objects = list(base_objects)
for draft in ():
    walk_kustomization(os.path.join(MANIFESTS, draft), set(), raw_objects)
# The paths tally-controller serves, read from its source: the route
# constants in controller/include/tally/controller/*.hpp that replica.cpp (the
# parts of a replica) passes to addWebhook. A base webhook naming any other path would refuse everything
# it matches (failurePolicy Fail); a served path no base webhook names is
# never called.
def served_webhook_paths():
    include = os.path.join(ROOT, "controller", "include", "tally", "controller")
    constants = {}
    if os.path.isdir(include):
        for name in sorted(os.listdir(include)):
            if name.endswith(".hpp"):
                text = open(os.path.join(include, name), encoding="utf-8").read()
                for m in re.finditer(r'constexpr\s+std::string_view\s+(k\w+WebhookPath)\s*=\s*"([^"]+)"', text):
                    constants[m.group(1)] = m.group(2)
    replica_cpp = os.path.join(ROOT, "controller", "src", "replica.cpp")
    text = open(replica_cpp, encoding="utf-8").read() if os.path.isfile(replica_cpp) else ""
    used = re.findall(r"addWebhook\(\s*\w+\s*,\s*std::string\(\s*(?:controller::)?(k\w+WebhookPath)\s*\)", text)
    return {constants[c] for c in used if c in constants}


SERVED_WEBHOOK_PATHS = served_webhook_paths()
check("/validate/gpudevices" in SERVED_WEBHOOK_PATHS, "controller/src/replica.cpp",
      f"cannot find the served webhook routes (found {sorted(SERVED_WEBHOOK_PATHS)})")
base_paths = set()
for o in base_objects:
    md = o.get("metadata", {})
    if o.get("kind") in ("MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"):
        for w in o.get("webhooks", []):
            path = w.get("clientConfig", {}).get("service", {}).get("path")
            base_paths.add(path)
            check(path in SERVED_WEBHOOK_PATHS, "base kustomization",
                  f"{o.get('kind')} {md.get('name')}/{w.get('name')}: tally-controller does not serve {path}")
for path in sorted(SERVED_WEBHOOK_PATHS - base_paths):
    fail("base kustomization", f"tally-controller serves {path} but no webhook configuration in the base calls it")
check(any(o.get("kind") == "Deployment" and o.get("metadata", {}).get("name") == "tally-controller"
          for o in base_objects), "base kustomization", "no tally-controller Deployment")
check(any(o.get("kind") == "Deployment" and o.get("metadata", {}).get("name") == "tally-extender"
          for o in base_objects), "base kustomization", "no tally-extender Deployment")
kind_objects = []
walk_kustomization(os.path.join(ROOT, "e2e", "kind"), set(), kind_objects)

objects = load_all(RENDERED) if RENDERED else raw_objects
by_kind = {}
for o in objects:
    by_kind.setdefault(o.get("kind"), []).append(o)


def named(kind, name, namespace=None):
    for o in by_kind.get(kind, []):
        md = o.get("metadata", {})
        if md.get("name") == name and (namespace is None or md.get("namespace") == namespace):
            return o
    return None


def prefixed(kind, prefix, namespace=None):
    """A generated ConfigMap carries a hash suffix once rendered."""
    for o in by_kind.get(kind, []):
        md = o.get("metadata", {})
        if (md.get("name") == prefix or md.get("name", "").startswith(prefix + "-")) and \
                (namespace is None or md.get("namespace") == namespace):
            return o
    return None


CLUSTER_SCOPED = {"Namespace", "CustomResourceDefinition", "ClusterRole", "ClusterRoleBinding",
                  "MutatingWebhookConfiguration", "ValidatingWebhookConfiguration"}
for o in objects:
    md = o.get("metadata", {})
    where = f"{o.get('kind')}/{md.get('name')}"
    check(bool(o.get("apiVersion")) and bool(o.get("kind")) and bool(md.get("name")), where,
          "apiVersion, kind and metadata.name are required")
    if o.get("kind") in CLUSTER_SCOPED:
        check("namespace" not in md, where, "cluster-scoped object has a namespace")
    else:
        check(bool(md.get("namespace")), where, "namespaced object names no namespace")

# 3. CRDs: structural-looking schemas and every SPEC §2.1 field.
INT_OR_STRING = "x-kubernetes-int-or-string"
PRESERVE = "x-kubernetes-preserve-unknown-fields"


def structural(schema, path, where):
    if not isinstance(schema, dict):
        fail(where, f"{path}: schema is not an object")
        return
    if not (schema.get(INT_OR_STRING) or schema.get(PRESERVE)):
        check("type" in schema, where, f"{path}: no type (structural schemas type every node)")
    for bad in ("$ref", "definitions", "dependencies", "patternProperties", "uniqueItems"):
        check(bad not in schema, where, f"{path}: {bad} is not allowed in a CRD schema")
    t = schema.get("type")
    props = schema.get("properties", {})
    if props:
        check(t == "object", where, f"{path}: properties on a non-object")
        check("additionalProperties" not in schema, where,
              f"{path}: properties and additionalProperties together")
    for req in schema.get("required", []):
        check(req in props, where, f"{path}: required field {req} is not a property")
    if t == "array":
        if check("items" in schema, where, f"{path}: array without items"):
            structural(schema["items"], path + "[]", where)
        keys = schema.get("x-kubernetes-list-map-keys")
        if keys:
            item = schema.get("items", {})
            check(schema.get("x-kubernetes-list-type") == "map", where,
                  f"{path}: list-map-keys without list-type map")
            for key in keys:
                check(key in item.get("required", []) or "default" in item.get("properties", {}).get(key, {}),
                      where, f"{path}: list map key {key} must be required or defaulted")
    for name, sub in props.items():
        structural(sub, f"{path}.{name}", where)
    if isinstance(schema.get("additionalProperties"), dict):
        structural(schema["additionalProperties"], path + ".*", where)
    for rule in schema.get("x-kubernetes-validations", []):
        check(bool(rule.get("rule")) and bool(rule.get("message")), where,
              f"{path}: a validation rule needs rule and message")
        r = rule.get("rule", "")
        check(r.count("(") == r.count(")"), where, f"{path}: unbalanced parentheses in {r!r}")
        check(r.count("'") % 2 == 0, where, f"{path}: unbalanced quotes in {r!r}")
    if "pattern" in schema:
        try:
            re.compile(schema["pattern"])
        except re.error as e:
            fail(where, f"{path}: pattern does not compile: {e}")


EXPECT = {
    "gpudeviceclasses.gpu.tally.dev": {
        "scope": "Cluster", "kind": "GPUDeviceClass", "short": "gdc",
        "spec": ["workload", "allocation", "resourceName", "nodeMode", "memoryMiB", "maxCount",
                 "requiresEntitlement", "share", "operatorSpareDevices",
                 "singleDevicePilotApproved", "pciVendorSelector", "gateAcknowledgements"],
        "status": ["quotaUnit", "healthySchedulableDevices", "healthySchedulableUnits", "reservedDevices",
                   "reservedUnits", "nonReservedHardQuota", "spareDevices", "spareUnits", "headroom", "inFlightTransaction",
                   "lastAuditTime", "findings", "conditions"],
        "enums": {"spec.workload": ["vm", "pod"],
                  "spec.allocation": ["passthrough", "vgpu", "shared"],
                  "spec.nodeMode": ["vm-passthrough", "vm-vgpu", "pod-hami"]},
        "columns": ["Allocation", "Mode", "Unit", "Healthy", "Reserved", "Quota", "Spare", "Headroom", "Invariant", "Gate",
                    "Reason", "Age"],
    },
    "gpudevices.gpu.tally.dev": {
        "scope": "Namespaced", "kind": "GPUDevice", "short": "gdev",
        "spec": ["class", "count"],
        "status": ["phase", "node", "attachedTo", "conditions"],
        "enums": {"status.phase": ["Pending", "Bound", "Attached", "Lost", "Released"]},
        "columns": ["Class", "Count", "Phase", "Node", "VMI", "Age"],
    },
}


def at(schema, dotted):
    for part in dotted.split("."):
        schema = schema.get("properties", {}).get(part, {})
    return schema


crd_schemas = {}
for name, exp in EXPECT.items():
    crd = named("CustomResourceDefinition", name)
    where = f"CRD {name}"
    if not check(crd is not None, where, "missing from the kustomization"):
        continue
    check(crd["apiVersion"] == "apiextensions.k8s.io/v1", where, "not apiextensions.k8s.io/v1")
    spec = crd["spec"]
    check(spec["group"] == "gpu.tally.dev", where, "group is not gpu.tally.dev")
    check(spec["scope"] == exp["scope"], where, f"scope is not {exp['scope']}")
    check(spec["names"]["kind"] == exp["kind"], where, "wrong kind")
    check(exp["short"] in spec["names"].get("shortNames", []), where, f"short name {exp['short']} missing")
    check({"tally", "gpu"} <= set(spec["names"].get("categories", [])), where, "categories tally, gpu missing")
    versions = spec["versions"]
    check([v["name"] for v in versions] == ["v1alpha1"], where, "versions are not [v1alpha1]")
    v = versions[0]
    check(v.get("served") and v.get("storage"), where, "v1alpha1 not served+storage")
    check("status" in v.get("subresources", {}), where, "no status subresource")
    schema = v["schema"]["openAPIV3Schema"]
    crd_schemas[exp["kind"]] = schema
    structural(schema, "", where)
    for f in exp["spec"]:
        check(f in at(schema, "spec").get("properties", {}), where, f"spec.{f} missing")
    for f in exp["status"]:
        check(f in at(schema, "status").get("properties", {}), where, f"status.{f} missing")
    for path, values in exp["enums"].items():
        check(at(schema, path).get("enum") == values, where, f"{path} enum is not {values}")
    cols = [c["name"] for c in v.get("additionalPrinterColumns", []) if not c.get("priority")]
    check(cols == exp["columns"], where, f"printer columns {cols} != {exp['columns']}")
    for c in v.get("additionalPrinterColumns", []):
        check(c.get("jsonPath", "").startswith("."), where, f"column {c['name']}: jsonPath must start with '.'")
        check(c.get("type") in ("integer", "number", "string", "boolean", "date"), where,
              f"column {c['name']}: bad type")

# 3b. The schemas accept what they should and refuse what they should (OpenAPI part
#     only; CEL rules need an API server: validate.sh --server).
def validate(schema, value, path=""):
    errs = []
    t = schema.get("type")
    types = {"object": dict, "array": list, "string": str, "boolean": bool}
    if t == "integer":
        if not isinstance(value, int) or isinstance(value, bool):
            return [f"{path}: not an integer"]
        if "minimum" in schema and value < schema["minimum"]:
            errs.append(f"{path}: below minimum {schema['minimum']}")
        if "maximum" in schema and value > schema["maximum"]:
            errs.append(f"{path}: above maximum {schema['maximum']}")
    elif t in types and not isinstance(value, types[t]):
        return [f"{path}: not a {t}"]
    if "enum" in schema and value not in schema["enum"]:
        errs.append(f"{path}: {value!r} not in enum")
    if t == "string":
        if "pattern" in schema and not re.search(schema["pattern"], value):
            errs.append(f"{path}: {value!r} does not match pattern")
        if "maxLength" in schema and len(value) > schema["maxLength"]:
            errs.append(f"{path}: longer than {schema['maxLength']}")
        if "minLength" in schema and len(value) < schema["minLength"]:
            errs.append(f"{path}: shorter than {schema['minLength']}")
    if t == "object":
        props = schema.get("properties", {})
        for req in schema.get("required", []):
            if req not in value:
                errs.append(f"{path}.{req}: required")
        for k, sub in value.items():
            if k in props:
                errs += validate(props[k], sub, f"{path}.{k}")
            elif path and path != ".metadata" and "additionalProperties" not in schema and not schema.get(PRESERVE):
                errs.append(f"{path}.{k}: unknown field (pruned by the API server)")
    if t == "array":
        if "maxItems" in schema and len(value) > schema["maxItems"]:
            errs.append(f"{path}: more than {schema['maxItems']} items")
        for i, item in enumerate(value):
            errs += validate(schema.get("items", {}), item, f"{path}[{i}]")
    return errs


def obj(kind, spec, status=None, name="x"):
    o = {"apiVersion": "gpu.tally.dev/v1alpha1", "kind": kind, "metadata": {"name": name}, "spec": spec}
    if status is not None:
        o["status"] = status
    return o


CASES = [
    ("GPUDeviceClass", True, obj("GPUDeviceClass", {
        "workload": "vm", "allocation": "passthrough", "resourceName": "nvidia.com/GH100_H200_SXM_141GB",
        "nodeMode": "vm-passthrough", "memoryMiB": 144384, "maxCount": 8, "operatorSpareDevices": 1,
        "pciVendorSelector": "10DE:2335", "gateAcknowledgements": [
            {"failureId": "audit-7", "role": "product", "identity": "pm@example.com", "at": "2026-01-01T00:00:00Z"},
            {"failureId": "audit-7", "role": "sre", "identity": "sre@example.com"}]},
        {"healthySchedulableDevices": 16, "headroom": -2, "findings": [{"code": "StaleCapacity", "message": "m"}],
         "conditions": [{"type": "InvariantHolds", "status": "False", "reason": "Oversold", "message": "m",
                         "lastTransitionTime": "2026-01-01T00:00:00Z"}]})),
    ("GPUDeviceClass", True, obj("GPUDeviceClass", {
        "workload": "vm", "allocation": "vgpu", "resourceName": "nvidia.com/A100-10C", "requiresEntitlement": True})),
    ("GPUDeviceClass", True, obj("GPUDeviceClass", {
        "workload": "pod", "allocation": "shared", "resourceName": "nvidia.com/gpu", "memoryMiB": 16384,
        "share": {"memoryMiB": 8192, "corePercent": 25, "maxSharesPerDevice": 4}})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "mig", "resourceName": "nvidia.com/x"})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "passthrough", "resourceName": "gpu"})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "passthrough",
                                                     "resourceName": "nvidia.com/x", "maxCount": 0})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "pod", "allocation": "shared", "resourceName": "nvidia.com/gpu",
                                                     "share": {"memoryMiB": 1, "corePercent": 101, "maxSharesPerDevice": 1}})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "passthrough", "resourceName": "nvidia.com/x",
                                                     "pciVendorSelector": "10DE-2335"})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "passthrough", "resourceName": "nvidia.com/x",
                                                     "operatorSpareDevices": -1})),
    ("GPUDeviceClass", False, obj("GPUDeviceClass", {"workload": "vm", "allocation": "passthrough", "resourceName": "nvidia.com/x",
                                                     "gateAcknowledgements": [{"failureId": "a", "role": "cto", "identity": "x"}]})),
    ("GPUDevice", True, obj("GPUDevice", {"class": "nvidia-h200-passthrough", "count": 2},
                            {"phase": "Attached", "node": "n1", "attachedTo": {"namespace": "t", "name": "vm", "uid": "u"}})),
    ("GPUDevice", False, obj("GPUDevice", {"class": "nvidia-h200-passthrough", "count": 65})),
    ("GPUDevice", False, obj("GPUDevice", {"class": "nvidia-h200-passthrough", "count": 0})),
    ("GPUDevice", False, obj("GPUDevice", {"count": 1})),
    ("GPUDevice", False, obj("GPUDevice", {"class": "c", "count": 1}, {"phase": "Running"})),
]
for kind, ok, o in CASES:
    if kind not in crd_schemas:
        continue
    errs = validate(crd_schemas[kind], o)
    what = json.dumps(o["spec"])[:90]
    if ok:
        check(not errs, f"CRD {kind} sample", f"valid object refused: {errs} ({what})")
    else:
        check(bool(errs), f"CRD {kind} sample", f"invalid object accepted: {what}")

samples = os.path.join(MANIFESTS, "samples")
if os.path.isdir(samples):
    for fname in sorted(os.listdir(samples)):
        if not fname.endswith(".yaml"):
            continue
        for o in load_all(os.path.join(samples, fname)):
            if o.get("kind") in crd_schemas:
                errs = validate(crd_schemas[o["kind"]], o)
                check(not errs, f"samples/{fname}", f"{o['kind']}/{o['metadata']['name']}: {errs}")

# 4. Scheduler configuration.
cm = prefixed("ConfigMap", "tally-scheduler-config", "tally-system")
if check(cm is not None, "scheduler", "ConfigMap tally-scheduler-config missing"):
    cfg = yaml.safe_load(cm["data"]["config.yaml"])
    where = "scheduler config"
    check(cfg.get("apiVersion") == "kubescheduler.config.k8s.io/v1", where, "apiVersion is not kubescheduler.config.k8s.io/v1")
    check(cfg.get("kind") == "KubeSchedulerConfiguration", where, "kind is not KubeSchedulerConfiguration")
    check("tally-scheduler" in [p.get("schedulerName") for p in cfg.get("profiles", [])], where,
          "no profile named tally-scheduler")
    ext = cfg.get("extenders", [])
    if check(len(ext) == 1, where, "expected exactly one extender"):
        e = ext[0]
        check(e.get("urlPrefix") == "http://127.0.0.1:8888/tally", where, "urlPrefix")
        for verb in ("filter", "prioritize", "preempt", "bind"):
            check(e.get(f"{verb}Verb") == verb, where, f"{verb}Verb is not {verb}")
        check(isinstance(e.get("weight"), int) and e["weight"] > 0, where, "weight must be > 0 with prioritizeVerb")
        check(e.get("nodeCacheCapable") is True, where, "nodeCacheCapable must be true")
        check(e.get("enableHTTPS") is False, where, "enableHTTPS must be false (loopback sidecar)")
        check(re.fullmatch(r"\d+(ms|s)", str(e.get("httpTimeout", ""))) is not None, where, "httpTimeout missing or malformed")
        names = [m.get("name") for m in e.get("managedResources", [])]
        for rn in ("nvidia.com/gpu", "nvidia.com/gpumem", "nvidia.com/gpucores",
                   "nvidia.com/GH100_H200_SXM_141GB", "nvidia.com/A100-10C", "gpu.tally.dev/claims"):
            check(rn in names, where, f"managedResources lacks {rn}")
        claims = [m for m in e.get("managedResources", []) if m.get("name") == "gpu.tally.dev/claims"]
        check(all(m.get("ignoredByScheduler") is True for m in claims), where,
              "gpu.tally.dev/claims must be ignoredByScheduler: true (no node advertises it; it only makes the "
              "scheduler ask the extender about pods that name ResourceClaims)")
        for m in e.get("managedResources", []):
            check(isinstance(m.get("ignoredByScheduler"), bool), where, f"{m.get('name')}: ignoredByScheduler not set")
    le = cfg.get("leaderElection", {})
    role = named("Role", "tally-scheduler-lease", "tally-system")
    if check(role is not None, where, "Role tally-scheduler-lease missing"):
        allowed = [n for r in role["rules"] for n in r.get("resourceNames", [])]
        check(le.get("resourceName") in allowed and le.get("resourceNamespace") == "tally-system", where,
              "leader lease name/namespace not covered by Role tally-scheduler-lease")

# Objects the platform provides before Tally is installed (manifests/README.md):
# the Deployments mount them and do not start without them.
PLATFORM_PROVIDED = {
    "ConfigMap": {"tally-webhook-client-ca": "the CA of the API server's webhook client certificate"},
    "Secret": {"tally-extender-tls": "the standalone extender's serving pair and the scheduler's client CA"},
}

# 5. Workloads: accounts, config, security, probes, resources.
for d in by_kind.get("Deployment", []):
    name = d["metadata"]["name"]
    ns = d["metadata"]["namespace"]
    where = f"Deployment/{name}"
    pod = d["spec"]["template"]["spec"]
    sel = d["spec"]["selector"].get("matchLabels", {})
    labels = d["spec"]["template"]["metadata"].get("labels", {})
    check(all(labels.get(k) == v for k, v in sel.items()), where, "selector does not match template labels")
    check(named("ServiceAccount", pod.get("serviceAccountName"), ns) is not None, where,
          f"ServiceAccount {pod.get('serviceAccountName')} missing")
    psc = pod.get("securityContext", {})
    check(psc.get("runAsNonRoot") is True, where, "pod securityContext.runAsNonRoot must be true")
    check(psc.get("seccompProfile", {}).get("type") == "RuntimeDefault", where, "seccompProfile RuntimeDefault missing")
    for vol in pod.get("volumes", []):
        if "configMap" in vol:
            cm_name = vol["configMap"]["name"]
            if cm_name in PLATFORM_PROVIDED.get("ConfigMap", {}):
                # The platform's, not the base's: required (a pod without it must not start).
                check(vol["configMap"].get("optional") is False, where,
                      f"ConfigMap {cm_name} ({PLATFORM_PROVIDED['ConfigMap'][cm_name]}) must be optional: false")
            else:
                check(prefixed("ConfigMap", cm_name, ns) is not None, where, f"ConfigMap {cm_name} missing")
        if "secret" in vol:
            secret = vol["secret"]["secretName"]
            check(secret in PLATFORM_PROVIDED.get("Secret", {}), where,
                  f"Secret {secret} is neither generated by Tally nor a documented platform-provided one")
            check(vol["secret"].get("optional") is False, where, f"Secret {secret} must be optional: false")
    containers = pod.get("containers", []) + [c for c in pod.get("initContainers", []) if c.get("restartPolicy") == "Always"]
    for c in containers:
        cw = f"{where}/{c['name']}"
        sc = c.get("securityContext", {})
        check(sc.get("readOnlyRootFilesystem") is True, cw, "readOnlyRootFilesystem must be true")
        check(sc.get("allowPrivilegeEscalation") is False, cw, "allowPrivilegeEscalation must be false")
        check(sc.get("capabilities", {}).get("drop") == ["ALL"], cw, "capabilities must drop ALL")
        check("requests" in c.get("resources", {}) and "memory" in c["resources"].get("limits", {}), cw,
              "resources.requests and a memory limit are required")
        check("livenessProbe" in c and "readinessProbe" in c, cw, "liveness and readiness probes required")
        ports = {p.get("name") for p in c.get("ports", [])}
        for probe in ("startupProbe", "livenessProbe", "readinessProbe"):
            port = c.get(probe, {}).get("httpGet", {}).get("port")
            if isinstance(port, str):
                check(port in ports, cw, f"{probe} uses unknown port {port}")
        if c.get("image", "").startswith("tally:"):
            check(c.get("command", [""])[0] in ("/usr/local/bin/tally-extender", "/usr/local/bin/tally-controller"),
                  cw, "tally image needs an explicit command")
            paths = {c.get(p, {}).get("httpGet", {}).get("path") for p in ("livenessProbe", "readinessProbe")}
            check({"/healthz", "/readyz"} <= paths, cw, "probes must use /healthz and /readyz")

for svc in by_kind.get("Service", []):
    where = f"Service/{svc['metadata']['name']}"
    sel = svc["spec"].get("selector", {})
    match = [d for d in by_kind.get("Deployment", [])
             if all(d["spec"]["template"]["metadata"].get("labels", {}).get(k) == v for k, v in sel.items())]
    check(len(match) == 1, where, f"selector matches {len(match)} Deployments")
    if match:
        ports = {p.get("name") for c in match[0]["spec"]["template"]["spec"]["containers"] for p in c.get("ports", [])}
        for p in svc["spec"]["ports"]:
            tp = p.get("targetPort")
            if isinstance(tp, str):
                check(tp in ports, where, f"targetPort {tp} is no container port")

# 6. RBAC bindings point at existing roles and accounts.
for kind in ("RoleBinding", "ClusterRoleBinding"):
    for b in by_kind.get(kind, []):
        where = f"{kind}/{b['metadata']['name']}"
        ref = b["roleRef"]
        if not ref["name"].startswith("system:") and ref["name"] != "extension-apiserver-authentication-reader":
            rns = b["metadata"].get("namespace") if ref["kind"] == "Role" else None
            check(named(ref["kind"], ref["name"], rns) is not None, where, f"{ref['kind']} {ref['name']} missing")
        for s in b.get("subjects", []):
            if s.get("kind") == "ServiceAccount":
                check(named("ServiceAccount", s["name"], s.get("namespace")) is not None, where,
                      f"ServiceAccount {s.get('namespace')}/{s['name']} missing")
for kind in ("Role", "ClusterRole"):
    for r in by_kind.get(kind, []):
        for rule in r.get("rules", []):
            check("*" not in rule.get("verbs", []) and "*" not in rule.get("resources", []),
                  f"{kind}/{r['metadata']['name']}", "wildcards are not least privilege")


# 6b. What each account's informers list and watch is granted (the first
# rollout on kind found the extender unready on 403s: organizations and the
# billing-plans ConfigMap in kube-dc were missing).
def granted(account, group, resource, verb, namespace=None):
    for kind in ("RoleBinding", "ClusterRoleBinding"):
        for b in by_kind.get(kind, []):
            if kind == "RoleBinding" and namespace is not None and b["metadata"].get("namespace") != namespace:
                continue
            if not any(sb.get("kind") == "ServiceAccount" and sb.get("name") == account for sb in b.get("subjects", [])):
                continue
            ref = b["roleRef"]
            role = named(ref["kind"], ref["name"], b["metadata"].get("namespace") if ref["kind"] == "Role" else None)
            for rule in (role or {}).get("rules", []):
                if group in rule.get("apiGroups", []) and resource in rule.get("resources", []) \
                        and verb in rule.get("verbs", []):
                    return True
    return False


for account in ("tally-extender", "tally-scheduler"):
    for group, resource, ns in (("kube-dc.com", "organizations", None), ("", "configmaps", "kube-dc")):
        for verb in ("list", "watch"):
            check(granted(account, group, resource, verb, ns), f"ServiceAccount/{account}",
                  f"cannot {verb} {resource}{' in ' + ns if ns else ''} (the extender's informers need it)")

# 7. Webhook configurations.
EXCLUDED = {"kube-system", "kube-public", "kube-node-lease", "tally-system"}
# Fields a matchCondition may meet missing: every access to one must be guarded by has().
OPTIONAL_FIELDS = ("annotations", "ownerReferences", "initContainers", "resources", "requests", "limits")


def controller_arg(flag, default=None):
    d = named("Deployment", "tally-controller", "tally-system")
    if not d:
        return default
    for c in d["spec"]["template"]["spec"]["containers"]:
        for a in c.get("args", []):
            if a.startswith(flag + "="):
                return a.split("=", 1)[1]
    return default


def seconds(duration):
    m = re.fullmatch(r"(\d+)(ms|s|m)", str(duration))
    if not m:
        return None
    return int(m.group(1)) * {"ms": 0.001, "s": 1, "m": 60}[m.group(2)]


placement_wait = seconds(controller_arg("--vmi-placement-wait", "5s"))
check(placement_wait is not None, "Deployment/tally-controller", "--vmi-placement-wait is not a duration")
for kind in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
    for cfg in by_kind.get(kind, []):
        check(cfg["metadata"].get("name", "").startswith("tally-"), f"{kind}/{cfg['metadata'].get('name')}",
              "Tally's webhook configurations are named tally-*")
        for w in cfg.get("webhooks", []):
            where = f"{kind}/{cfg['metadata']['name']}/{w['name']}"
            is_vmi = "virtualmachineinstances" in json.dumps(w.get("rules"))
            check(w.get("sideEffects") == "NoneOnDryRun", where, "sideEffects must be NoneOnDryRun")
            if is_vmi:
                # The answer waits for the binder: the API server must wait longer.
                t = w.get("timeoutSeconds")
                check(isinstance(t, int) and placement_wait is not None and t >= placement_wait + 5 and t <= 30,
                      where, f"timeoutSeconds {t} must be at least --vmi-placement-wait ({placement_wait}s) + 5s and at most 30")
                check(w.get("reinvocationPolicy") == "IfNeeded", where, "VMI webhook needs reinvocationPolicy IfNeeded")
            else:
                check(w.get("timeoutSeconds") == 10, where, "timeoutSeconds must be 10")
            check(w.get("admissionReviewVersions") == ["v1"], where, "admissionReviewVersions must be [v1]")
            check(w.get("failurePolicy") == "Fail", where, "failurePolicy must be Fail")
            check(w.get("matchPolicy") == "Equivalent", where, "matchPolicy must be Equivalent")
            exprs = w.get("namespaceSelector", {}).get("matchExpressions", [])
            cluster_scoped = all(r.get("scope") == "Cluster" for r in w.get("rules", []))
            check(cluster_scoped or any(e.get("key") == "kubernetes.io/metadata.name" and e.get("operator") == "NotIn"
                      and EXCLUDED <= set(e.get("values", [])) for e in exprs), where,
                  f"namespaceSelector must exclude {', '.join(sorted(EXCLUDED))}")
            svc = w.get("clientConfig", {}).get("service", {})
            check("caBundle" not in w.get("clientConfig", {}), where, "no caBundle is shipped (tally-controller injects it)")
            target = named("Service", svc.get("name"), svc.get("namespace"))
            if check(target is not None, where, f"service {svc.get('namespace')}/{svc.get('name')} missing"):
                check(svc.get("port") in [p["port"] for p in target["spec"]["ports"]], where,
                      f"service port {svc.get('port')} not exposed")
            check(str(svc.get("path", "")).startswith("/"), where, "clientConfig.service.path missing")
            for mc in w.get("matchConditions", []):
                e = mc.get("expression", "")
                check(e.count("(") == e.count(")"), where, f"matchCondition {mc.get('name')}: unbalanced parentheses")
                for field in OPTIONAL_FIELDS:
                    if re.search(rf"\.{field}\b", e):
                        check(re.search(rf"has\([\w.]*\.{field}\)", e) is not None, where,
                              f"matchCondition {mc.get('name')}: .{field} is used without has()")
            if w.get("rules") and any("pods" in r.get("resources", []) for r in w["rules"]):
                text = " ".join(mc.get("expression", "") for mc in w.get("matchConditions", []))
                check("requests" in text and "initContainers" in text and "k.contains('/')" in text
                      and "nvidia.com/" not in text, where,
                      "a pod webhook must send every pod requesting an extended resource of any vendor "
                      "(containers and init containers): the model decides which are GPUs")
                if w["name"] in ("gpu-pods.validate.gpu.tally.dev", "gpu-pods.mutate.gpu.tally.dev"):
                    check("has(object.spec.resourceClaims)" in text and " || " in text, where,
                          "the GPU pod webhooks must also send every pod naming ResourceClaims (the DRA pools' pods)")
names = {w["name"]: (c, w) for k in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")
         for c in by_kind.get(k, []) for w in c["webhooks"]}
WANTED = {  # webhook: (configuration kind, path)
    "gpudevices.validate.gpu.tally.dev": ("ValidatingWebhookConfiguration", "/validate/gpudevices"),
    "virtualmachineinstances.mutate.gpu.tally.dev": ("MutatingWebhookConfiguration", "/mutate/virtualmachineinstances"),
    "launcher-pods.mutate.gpu.tally.dev": ("MutatingWebhookConfiguration", "/mutate/launcher-pods"),
    "gpu-pods.validate.gpu.tally.dev": ("ValidatingWebhookConfiguration", "/validate/gpu-pods"),
    "gpu-pods.mutate.gpu.tally.dev": ("MutatingWebhookConfiguration", "/mutate/gpu-pods"),
    "organizations.validate.gpu.tally.dev": ("ValidatingWebhookConfiguration", "/validate/organizations"),
    "gpudeviceclasses.validate.gpu.tally.dev": ("ValidatingWebhookConfiguration", "/validate/gpudeviceclasses"),
}
for wanted, (kind, path) in WANTED.items():
    if check(wanted in names, "webhooks", f"{wanted} missing"):
        c, w = names[wanted]
        check(c["kind"] == kind, "webhooks", f"{wanted} must be in a {kind}")
        check(w.get("clientConfig", {}).get("service", {}).get("path") == path, "webhooks", f"{wanted} must call {path}")
vmi_text = " ".join(mc.get("expression", "") for mc in names.get("virtualmachineinstances.mutate.gpu.tally.dev",
                                                                  ({}, {}))[1].get("matchConditions", []))
check("gpu.tally.dev/devices" in vmi_text and "gpu.tally.dev/device-templates" in vmi_text and "spec" not in vmi_text,
      "webhooks", "the VMI webhook must send exactly the VMIs with Tally's annotations (a VMI without them never waits for Tally)")
launcher_text = " ".join(mc.get("expression", "") for mc in names.get("launcher-pods.mutate.gpu.tally.dev",
                                                                       ({}, {}))[1].get("matchConditions", []))
check("ownerReferences" in launcher_text and "'VirtualMachineInstance'" in launcher_text, "webhooks",
      "the launcher pod webhook must send only pods owned by a VirtualMachineInstance")
ctl = named("ClusterRole", "tally-controller")
if ctl:
    def injectable(resource):
        return {n for r in ctl["rules"] for n in r.get("resourceNames", [])
                if resource in r.get("resources", []) and {"get", "patch"} <= set(r.get("verbs", []))}
    def watchable(resource):
        return any(resource in r.get("resources", []) and not r.get("resourceNames")
                   and {"list", "watch"} <= set(r.get("verbs", [])) for r in ctl["rules"])
    # Every served configuration in the base has its caBundle injected: named
    # by the Deployment's flag and patchable by name. The drafts get theirs
    # when the controller serves them.
    for kind, resource, flag in (("ValidatingWebhookConfiguration", "validatingwebhookconfigurations", "--webhook-configurations"),
                                 ("MutatingWebhookConfiguration", "mutatingwebhookconfigurations",
                                  "--mutating-webhook-configurations")):
        listed = set(filter(None, (controller_arg(flag) or "").split(",")))
        in_base = {c["metadata"]["name"] for c in base_objects if c.get("kind") == kind}
        check(listed == in_base, "Deployment/tally-controller",
              f"{flag} names {sorted(listed)}, the base has {sorted(in_base)}")
        check(injectable(resource) == in_base, "rbac",
              f"tally-controller may get/patch {resource} {sorted(injectable(resource))}, the base has {sorted(in_base)}")
        if in_base:
            check(watchable(resource), "rbac", f"tally-controller must list/watch {resource} (the keeper's informer)")
    if by_kind.get("MutatingWebhookConfiguration") and any(
            "virtualmachineinstances" in json.dumps(w.get("rules")) for c in base_objects
            if c.get("kind") == "MutatingWebhookConfiguration" for w in c["webhooks"]):
        check(controller_arg("--watch-kubevirt") == "true", "Deployment/tally-controller",
              "--watch-kubevirt=true is needed: without the KubeVirt CR the VMI webhook refuses every GPU class")
        check(watchable("kubevirts"), "rbac", "tally-controller must list/watch kubevirts")

# Every flag the controller and extender Deployments pass is one the binary defines.
flag_sources = {
    "/usr/local/bin/tally-controller": ["controller/src/flags.cpp", "state/flags/source_flags.cpp",
                                        "runtime/flags/process_flags.cpp"],
    "/usr/local/bin/tally-extender": ["extender/src/main.cpp", "state/flags/source_flags.cpp",
                                      "runtime/flags/process_flags.cpp"],
}
for d in by_kind.get("Deployment", []):
    pod = d["spec"]["template"]["spec"]
    for c in pod.get("containers", []) + pod.get("initContainers", []):
        sources = flag_sources.get((c.get("command") or [""])[0])
        if not sources or not all(os.path.isfile(os.path.join(ROOT, f)) for f in sources):
            continue
        text = "".join(open(os.path.join(ROOT, f), encoding="utf-8").read() for f in sources)
        for a in c.get("args", []):
            flag = a.split("=", 1)[0]
            if flag.startswith("--"):
                check(re.search(rf'[",]{re.escape(flag)}[",]', text) is not None, f"Deployment/{d['metadata']['name']}/{c['name']}",
                      f"{flag} is not a flag of {c['command'][0]} ({', '.join(sources)})")

# 8. kind overlay: the rendered output pins every Tally Deployment to the real node.
if RENDERED_KIND:
    for d in [o for o in load_all(RENDERED_KIND) if o.get("kind") == "Deployment"]:
        check(d["spec"]["template"]["spec"].get("nodeSelector", {}).get("tally.dev/e2e-host") == "true",
              f"e2e/kind Deployment/{d['metadata']['name']}", "not pinned to the real kind node")
    # One reservation ledger for every Tally binary of the overlay (the
    # scheduler's sidecar, the standalone extender, the controller): the same
    # --ledger-configmap, a ConfigMap the overlay creates, readable by each
    # binary's account (an unreadable source keeps the extender unready).
    rendered_kind = load_all(RENDERED_KIND)
    ledger_sources = {}
    for d in [o for o in rendered_kind if o.get("kind") == "Deployment"]:
        spec = d["spec"]["template"]["spec"]
        for c in spec.get("initContainers", []) + spec.get("containers", []):
            if not any(b in c.get("command", [""])[0] for b in ("tally-extender", "tally-controller")):
                continue
            where = f"e2e/kind Deployment/{d['metadata']['name']}/{c['name']}"
            source = [a.split("=", 1)[1] for a in c.get("args", []) if a.startswith("--ledger-configmap=")]
            check(len(source) == 1, where, "does not read the reservation ledger ConfigMap (--ledger-configmap)")
            if source:
                ledger_sources[where] = (source[0], spec.get("serviceAccountName"))
    check(len({s for s, _ in ledger_sources.values()}) == 1, "e2e/kind",
          f"Tally's binaries read different ledgers: {sorted(set(ledger_sources.values()))}")
    for where, (source, account) in ledger_sources.items():
        ns, _, name = source.partition("/")
        check(any(o.get("kind") == "ConfigMap" and o["metadata"].get("name") == name and
                  o["metadata"].get("namespace") == ns for o in rendered_kind), where,
              f"the ledger ConfigMap {source} is not created by the overlay")
        for verb in ("list", "watch"):
            check(granted(account, "", "configmaps", verb, ns), where,
                  f"ServiceAccount/{account} cannot {verb} configmaps in {ns} (the ledger {source})")
kcfg = os.path.join(ROOT, "e2e", "kind", "kind-config.yaml")
if os.path.isfile(kcfg):
    k = load_all(kcfg)[0]
    check(k.get("apiVersion") == "kind.x-k8s.io/v1alpha4" and k.get("kind") == "Cluster", rel(kcfg), "not a kind v1alpha4 Cluster")
    check(any(n.get("labels", {}).get("tally.dev/e2e-host") == "true" for n in k.get("nodes", [])), rel(kcfg),
          "no node labelled tally.dev/e2e-host=true")

# 9. Dockerfile: build deps in step with `make deps`, the build flags, a non-root runtime.
dockerfile = os.path.join(ROOT, "Dockerfile")
if check(os.path.isfile(dockerfile), "Dockerfile", "missing"):
    text = open(dockerfile).read()
    check("-DTALLY_E2E=OFF" in text and "-DTALLY_BENCH=OFF" in text, "Dockerfile", "cmake must build with TALLY_E2E=OFF TALLY_BENCH=OFF")
    check(re.search(r"^USER\s+[1-9][0-9]*(:[0-9]+)?\s*$", text, re.M) is not None, "Dockerfile", "runtime USER must be a numeric non-root uid")
    check(len(re.findall(r"^FROM\s", text, re.M)) >= 2, "Dockerfile", "expected a multi-stage build")
    code = re.sub(r"#.*", "", text)
    for b in ("tally-extender", "tally-controller", "tallyctl"):
        check(len(re.findall(rf"(?<![\w-]){re.escape(b)}(?![\w-])", code)) >= 2, "Dockerfile",
              f"{b} not built and shipped (the base's Deployments run it)")
    makefile = os.path.join(ROOT, "Makefile")
    if os.path.isfile(makefile):
        mk = open(makefile).read().replace("\\\n", " ")
        m = re.search(r"^DEB_PACKAGES\s*:?=(.*)$", mk, re.M)
        if m:
            for pkg in m.group(1).split():
                if pkg.endswith("-dev") and not pkg.startswith("libclang"):
                    check(re.search(rf"(?<![\w-]){re.escape(pkg)}(?![\w-])", text) is not None, "Dockerfile",
                          f"build stage lacks {pkg} (listed in the Makefile's DEB_PACKAGES)")

for p in problems:
    print(p)
print(f"validate.py: {checks} checks, {len(problems)} problems")
sys.exit(1 if problems else 0)
