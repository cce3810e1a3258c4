#!/usr/bin/env python3
"""render-webhooks.py keeps the shipped webhook configurations as they are.

Usage: render-webhooks-test.py

Renders every manifests/webhook/*.yaml through the script's command line, with
and without a CA bundle, another name and narrowed namespaces, and fails
unless everything but metadata.name, clientConfig and namespaceSelector is
identical to the shipped file, and those three are what was asked for. Also:
several manifests under one --name hold their webhooks in order, and what
cannot be rendered faithfully (two kinds under one name, a cluster-scoped
webhook narrowed to namespaces, a plain http URL) is refused.
"""
import base64
import glob
import json
import os
import subprocess
import sys
import tempfile

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
SCRIPT = os.path.join(HERE, "render-webhooks.py")
URL = "https://127.0.0.1:9443"
problems = []


def check(cond, where, what):
    if not cond:
        problems.append(f"FAIL {where}: {what}")
    return cond


def run(*args):
    out = subprocess.run([sys.executable, SCRIPT, *args], capture_output=True, text=True)
    return out.returncode, out.stdout, out.stderr


def rendered(where, *args):
    rc, out, err = run(*args)
    if not check(rc == 0, where, f"render-webhooks.py {' '.join(args)} exited {rc}: {err}"):
        return None
    return json.loads(out)


def without(obj, *keys):
    return {k: v for k, v in obj.items() if k not in keys}


def same_but_local(where, shipped, got, name, ca_bundle, namespaces):
    check(without(got, "metadata", "webhooks") == without(shipped, "metadata", "webhooks"), where,
          "apiVersion/kind differ")
    check(without(got["metadata"], "name") == without(shipped["metadata"], "name"), where, "metadata differs")
    check(got["metadata"]["name"] == (name or shipped["metadata"]["name"]), where,
          f"metadata.name {got['metadata']['name']}")
    if not check(len(got["webhooks"]) == len(shipped["webhooks"]), where, "webhook count differs"):
        return
    for ours, theirs in zip(got["webhooks"], shipped["webhooks"]):
        at = f"{where} webhook {theirs['name']}"
        check(list(ours) == list(theirs), at, f"keys {list(ours)} != shipped {list(theirs)}")
        check(without(ours, "clientConfig", "namespaceSelector") == without(theirs, "clientConfig", "namespaceSelector"),
              at, "a field other than clientConfig/namespaceSelector differs from the shipped one")
        client = {"url": URL + theirs["clientConfig"]["service"]["path"]}
        if ca_bundle:
            client["caBundle"] = ca_bundle
        check(ours["clientConfig"] == client, at, f"clientConfig {ours['clientConfig']} != {client}")
        if namespaces and "namespaceSelector" in theirs:
            wanted = {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In",
                                            "values": namespaces}]}
            check(ours["namespaceSelector"] == wanted, at, f"namespaceSelector {ours['namespaceSelector']}")
        else:
            check(ours.get("namespaceSelector") == theirs.get("namespaceSelector"), at, "namespaceSelector changed")


def refused(where, *args):
    rc, _, err = run(*args)
    check(rc == 2 and err.startswith("render-webhooks.py: "), where, f"exit {rc}, stderr {err!r}; want 2 and a reason")


def main():
    manifests = sorted(glob.glob(os.path.join(HERE, "webhook", "*.yaml")))
    check(len(manifests) == 8, "manifests/webhook", f"{len(manifests)} manifests, want the README's 8")
    with tempfile.NamedTemporaryFile("w", suffix=".pem") as ca:
        ca.write("-----BEGIN CERTIFICATE-----\nnot a real one\n-----END CERTIFICATE-----\n")
        ca.flush()
        bundle = base64.b64encode(open(ca.name, "rb").read()).decode()
        shipped_of = {}
        for path in manifests:
            base = os.path.basename(path)
            with open(path) as f:
                shipped = yaml.safe_load(f)
            shipped_of[base] = shipped
            scoped = all("namespaceSelector" in w for w in shipped["webhooks"])
            spec = base[:-len(".yaml")] + ("=acme, acme-ml" if scoped else "")
            got = rendered(base, "--url", URL, base[:-len(".yaml")])
            if got:
                same_but_local(base, shipped, got, None, None, [])
            got = rendered(base, "--url", URL + "/", "--ca-bundle", ca.name, "--name", "tally-e2e-x", spec)
            if got:
                same_but_local(base + " (local)", shipped, got, "tally-e2e-x", bundle,
                               ["acme", "acme-ml"] if scoped else [])
            got = rendered(base + " (by path)", "--url", URL, path)
            if got:
                same_but_local(base + " (by path)", shipped, got, None, None, [])

        validating = [b for b, s in shipped_of.items() if s["kind"] == "ValidatingWebhookConfiguration"]
        got = rendered("merged", "--url", URL, "--name", "tally-e2e-all", *validating)
        if got:
            check([w["name"] for w in got["webhooks"]] ==
                  [w["name"] for b in validating for w in shipped_of[b]["webhooks"]],
                  "merged", "webhooks not those of every manifest in order")
        got = rendered("list", "--url", URL, *shipped_of)
        if got:
            check(got.get("kind") == "List" and [i["metadata"]["name"] for i in got["items"]] ==
                  [s["metadata"]["name"] for s in shipped_of.values()], "list", "not a List of the shipped names")

        refused("two kinds", "--url", URL, "--name", "x", "gpudevices", "vmis")
        refused("cluster-scoped narrowed", "--url", URL, "gpudeviceclasses=acme")
        refused("plain http", "--url", "http://127.0.0.1:9443", "gpudevices")
        refused("unknown manifest", "--url", URL, "no-such-webhook")
    for p in problems:
        print(p)
    print(f"render-webhooks: {len(manifests)} manifests, {len(problems)} problems")
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
