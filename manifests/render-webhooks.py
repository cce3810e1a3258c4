#!/usr/bin/env python3
"""The shipped webhook configurations (manifests/webhook/) as a cluster without
the tally-controller Service needs them: the tests, the demo and the benches
start the controller as a process and the API server calls it by URL.

Usage: render-webhooks.py --url https://HOST:PORT [--ca-bundle PEM_FILE] [--name NAME]
                          MANIFEST[=NAMESPACE,...] ...

MANIFEST is a file, or the name of one in manifests/webhook/ ("gpudevices" or
"gpudevices.yaml"). In each of its webhooks clientConfig.service becomes
clientConfig.url (--url and the service's path) and, with --ca-bundle, the
PEM file's base64 as clientConfig.caBundle; with =NAMESPACE,... the
namespaceSelector sends only objects of those namespaces (tests keep their
tenants apart). --name makes one configuration of that name holding the
webhooks of every MANIFEST in order (all of one kind); without it each keeps
its shipped name. Everything else (webhook names, rules, timeouts, failure
policies, side effects, match conditions, reinvocation) is written as shipped.

Prints JSON, which `kubectl apply -f -` reads: one configuration, or a v1
List of them. Exit status 2 on a usage or manifest error.
"""
import argparse
import base64
import json
import os
import sys

import yaml

WEBHOOK_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "webhook")
KINDS = ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration")


class RenderError(Exception):
    pass


def manifest_path(name):
    if os.path.isfile(name):
        return name
    shipped = os.path.join(WEBHOOK_DIR, name if name.endswith(".yaml") else name + ".yaml")
    if os.path.isfile(shipped):
        return shipped
    raise RenderError(f"{name}: neither a file nor a manifest of {WEBHOOK_DIR}")


def narrowed(namespaces):
    return {"matchExpressions": [{"key": "kubernetes.io/metadata.name", "operator": "In", "values": namespaces}]}


def local_webhook(webhook, where, url, ca_bundle, namespaces):
    """One webhook with its clientConfig (and namespaceSelector) replaced in place, keys in shipped order."""
    service = webhook.get("clientConfig", {}).get("service")
    if not service or not str(service.get("path", "")).startswith("/"):
        raise RenderError(f"{where}: webhook {webhook.get('name')} has no clientConfig.service.path")
    client = {"url": url + service["path"]}
    if ca_bundle is not None:
        client["caBundle"] = ca_bundle
    out = {}
    for key, value in webhook.items():
        out[key] = client if key == "clientConfig" else value
    if namespaces:
        # Webhooks of cluster-scoped objects ship without a selector: a narrowed
        # one would not narrow them.
        if "namespaceSelector" not in webhook:
            raise RenderError(f"{where}: webhook {webhook['name']} has no namespaceSelector to narrow")
        out["namespaceSelector"] = narrowed(namespaces)
    return out


def local_configuration(path, url, ca_bundle, namespaces):
    with open(path) as f:
        doc = yaml.safe_load(f)
    if not isinstance(doc, dict) or doc.get("kind") not in KINDS or not doc.get("webhooks"):
        raise RenderError(f"{path}: not a webhook configuration with webhooks")
    out = dict(doc)
    out["webhooks"] = [local_webhook(w, path, url, ca_bundle, namespaces) for w in doc["webhooks"]]
    return out


def merged(configurations, name):
    kinds = {c["kind"] for c in configurations}
    if len(kinds) != 1:
        raise RenderError(f"--name {name}: one configuration cannot hold {' and '.join(sorted(kinds))}")
    out = dict(configurations[0])
    out["metadata"] = dict(out["metadata"], name=name)
    out["webhooks"] = [w for c in configurations for w in c["webhooks"]]
    return out


def render(manifests, url, ca_bundle=None, name=None):
    """manifests: [(file or shipped name, [namespace, ...])]; the object to print."""
    url = url.rstrip("/")
    if not url.startswith("https://"):
        raise RenderError(f"--url {url}: the API server calls webhooks over https only")
    configurations = [local_configuration(manifest_path(m), url, ca_bundle, ns) for m, ns in manifests]
    if name:
        return merged(configurations, name)
    if len(configurations) == 1:
        return configurations[0]
    return {"apiVersion": "v1", "kind": "List", "items": configurations}


def parse_manifest(arg):
    name, _, namespaces = arg.partition("=")
    return name, [n.strip() for n in namespaces.split(",") if n.strip()]


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True, help="https://HOST:PORT the API server calls")
    parser.add_argument("--ca-bundle", help="PEM file of the CA that signed the serving certificate")
    parser.add_argument("--name", help="one configuration of this name holding every MANIFEST's webhooks")
    parser.add_argument("manifests", nargs="+", metavar="MANIFEST[=NAMESPACE,...]")
    args = parser.parse_args()
    try:
        ca_bundle = None
        if args.ca_bundle:
            with open(args.ca_bundle, "rb") as f:
                ca_bundle = base64.b64encode(f.read()).decode()
        out = render([parse_manifest(m) for m in args.manifests], args.url, ca_bundle, args.name)
    except (RenderError, OSError, yaml.YAMLError) as e:
        print(f"render-webhooks.py: {e}", file=sys.stderr)
        return 2
    json.dump(out, sys.stdout, indent=2)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main())
