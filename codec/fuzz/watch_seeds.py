#!/usr/bin/env python3
"""Writes the seed corpora of the informers' watch fuzz targets:

  watch-json-corpus/      state_json_watch_fuzzer: JSON watch streams and LIST
                          bodies of every kind the informers watch
  watch-protobuf-corpus/  state_protobuf_watch_fuzzer: protobuf watch streams
                          and LIST bodies of the built-in kinds

Each seed's first byte is the fuzz targets' piece selector (the watch stream
arrives in pieces of 1 + byte % 64 * 37 bytes); a JSON seed's second byte is
the kind (its index in state::kKinds, model::Kind's order); the rest is what
the API server sends. The objects are those of codec/fuzz/corpus (and the ledger
ConfigMap of ledger-corpus); the protobuf messages are encoded by protoc from
runtime/proto, the reference for the wire format the decoders read, and framed
as a real API server frames them (a 4-byte big-endian length, WatchEvent,
"k8s\\0" + runtime.Unknown). Run from anywhere: codec/fuzz/watch_seeds.py
"""
import copy
import json
import pathlib
import struct
import subprocess

HERE = pathlib.Path(__file__).resolve().parent
ROOT = HERE.parent.parent
PROTO = ROOT / "runtime" / "proto"


def items(name):
    return json.loads((HERE / "corpus" / name).read_text())["items"]


def compact(value):
    return json.dumps(value, separators=(",", ":"))


def with_rv(obj, rv, **labels):
    out = copy.deepcopy(obj)
    out.setdefault("metadata", {})["resourceVersion"] = str(rv)
    if labels:
        out["metadata"].setdefault("labels", {}).update(labels)
    return out


def write(directory, name, piece, body, kind=None):
    directory.mkdir(exist_ok=True)
    (directory / name).write_bytes(bytes([piece] + ([] if kind is None else [KIND_INDEX[kind]])) + body)


# model::Kind's order (state::kKinds): the JSON target's second byte.
KIND_INDEX = {k: i for i, k in enumerate(
    ["Node", "Pod", "Namespace", "HierarchicalResourceQuota", "ResourceQuota", "DeviceClass", "GpuDevice",
     "VirtualMachineInstance", "Organization", "BillingPlans", "KubeVirt", "Ledger"])}


GONE = {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Failure",
        "message": "too old resource version: 100 (212)", "reason": "Expired", "code": 410}


def json_seeds():
    out = HERE / "watch-json-corpus"
    ledger = json.loads((HERE / "ledger-corpus" / "configmap.json").read_text())
    kinds = {
        "node": (items("node.json")[0], "NodeList", "Node"),
        "node-inventory": (items("nodeinventory.json")[0], "NodeList", "Node"),
        "pod": (items("pod.json")[0], "PodList", "Pod"),
        "pod-init": (items("podinit.json")[0], "PodList", "Pod"),
        "namespace": (items("namespace.json")[0], "NamespaceList", "Namespace"),
        "hrq": (items("hierarchicalresourcequota.json")[0], "HierarchicalResourceQuotaList",
                "HierarchicalResourceQuota"),
        "resourcequota": (items("resourcequota.json")[0], "ResourceQuotaList", "ResourceQuota"),
        "gpudeviceclass": (items("gpudeviceclass.json")[0], "GPUDeviceClassList", "DeviceClass"),
        "gpudevice": (items("gpudevice.json")[0], "GPUDeviceList", "GpuDevice"),
        "vmi": (items("virtualmachineinstance.json")[0], "VirtualMachineInstanceList", "VirtualMachineInstance"),
        "organization": (items("organization.json")[0], "OrganizationList", "Organization"),
        "billing-plans": (items("configmap.json")[0], "ConfigMapList", "BillingPlans"),
        "kubevirt": (items("kubevirt.json")[0], "KubeVirtList", "KubeVirt"),
        "ledger": (ledger, "ConfigMapList", "Ledger"),
    }
    for n, (name, (obj, list_kind, kind)) in enumerate(sorted(kinds.items())):
        # A watch from a resourceVersion: the object added, changed, a
        # bookmark, the object deleted; the first one's watch then expires.
        events = [
            {"type": "ADDED", "object": with_rv(obj, 201)},
            {"type": "MODIFIED", "object": with_rv(obj, 205, **{"tally.dev/seed": "modified"})},
            {"type": "BOOKMARK", "object": {"kind": obj.get("kind", ""), "apiVersion": obj.get("apiVersion", "v1"),
                                            "metadata": {"resourceVersion": "209", "annotations": {
                                                "k8s.io/initial-events-end": "true"}}}},
            {"type": "DELETED", "object": with_rv(obj, 212)},
        ]
        if n == 0:
            events.append({"type": "ERROR", "object": GONE})
        # Pieces of 1, 38, 186 and 2332 bytes, in turn.
        piece = [0, 1, 5, 63][n % 4]
        write(out, f"{name}-watch.jsonl", piece, "".join(compact(e) + "\n" for e in events).encode(), kind)
        page = {"kind": list_kind, "apiVersion": obj.get("apiVersion", "v1"),
                "metadata": {"resourceVersion": "200", "continue": "eyJ2IjoibWV0YS5rOHMuaW8vdjEiLCJydiI6MjAwfQ"},
                "items": [with_rv(obj, 199)]}
        write(out, f"{name}-list.json", 63, compact(page).encode(), kind)
    # The object before its type (the decoder defers it), and an empty LIST.
    pod = items("pod.json")[0]
    write(out, "pod-object-first.jsonl", 1,
          (compact({"object": with_rv(pod, 301), "type": "ADDED"}) + "\n").encode(), "Pod")
    write(out, "empty-list.json", 63, b'{"kind":"PodList","apiVersion":"v1","metadata":{"resourceVersion":"7"},'
                                      b'"items":null}', "Pod")


# -- protobuf -----------------------------------------------------------------

def protoc(message, text):
    return subprocess.run(["protoc", f"-I{PROTO}", f"--encode=tally.k8s.{message}", "k8s_meta.proto",
                           "k8s_core.proto"], input=text.encode(), capture_output=True, check=True).stdout


def quoted(raw):
    return '"' + "".join(chr(b) if 32 <= b < 127 and b not in (34, 92) else f"\\{b:03o}" for b in raw) + '"'


def text(value):
    return quoted(value.encode())


def meta(name, rv, namespace=None, labels=None, annotations=None, owners=(), uid=None):
    parts = [f"name: {text(name)}"]
    if namespace is not None:
        parts.append(f"namespace: {text(namespace)}")
    parts.append(f"uid: {text(uid or name + '-uid')}")
    parts.append(f"resourceVersion: {text(str(rv))}")
    parts.append("generation: 1")
    for k, v in (labels or {}).items():
        parts.append(f"labels {{ key: {text(k)} value: {text(v)} }}")
    for k, v in (annotations or {}).items():
        parts.append(f"annotations {{ key: {text(k)} value: {text(v)} }}")
    for kind, owner, controller in owners:
        parts.append(f"ownerReferences {{ kind: {text(kind)} name: {text(owner)} uid: {text(owner + '-uid')} "
                     f"apiVersion: \"kubevirt.io/v1\" controller: {str(controller).lower()} }}")
    return "metadata { " + " ".join(parts) + " }"


def quantities(field, values):
    return " ".join(f"{field} {{ key: {text(k)} value {{ string: {text(v)} }} }}" for k, v in values.items())


H200 = "nvidia.com/GH100_H200_SXM_141GB"


def node(rv, unschedulable=False):
    resources = {"cpu": "63500m", "memory": "1031644Mi", "pods": "110", H200: "8"}
    return (meta("gpu-h200-01", rv, labels={"kubernetes.io/hostname": "gpu-h200-01",
                                          "kube-dc.com/gpu.workload-mode": "vm-passthrough"})
            + f" spec {{ unschedulable: {str(unschedulable).lower()} }}"
            + " status { " + quantities("capacity", resources) + " " + quantities("allocatable", resources)
            + ' conditions { type: "MemoryPressure" status: "False" } conditions { type: "Ready" status: "True" } }')


def pod(rv, phase="Running"):
    return (meta("virt-launcher-train-vm-x7k2p", rv, namespace="acme-research",
                 labels={"kubevirt.io": "virt-launcher"}, owners=[("VirtualMachineInstance", "train-vm", True)])
            + ' spec { containers { name: "compute" image: "registry.example/compute:1" resources { '
            + quantities("limits", {"cpu": "8", H200: "2"}) + " "
            + quantities("requests", {"cpu": "8", "memory": "66Gi", H200: "2"}) + " } }"
            + ' initContainers { name: "metrics-agent" restartPolicy: "Always" resources { '
            + quantities("requests", {"nvidia.com/gpu": "1"}) + " } }"
            + ' nodeName: "gpu-h200-01" schedulerName: "tally-scheduler" '
            + quantities("overhead", {"cpu": "250m"}) + ' resourceClaims { name: "gpu" } }'
            + f" status {{ phase: {text(phase)} }}")


def namespace(rv):
    return meta("acme-research", rv, labels={"kubernetes.io/metadata.name": "acme-research",
                                            "hnc.x-k8s.io/included-namespace": "true"},
                annotations={"hnc.x-k8s.io/subnamespace-of": "acme"})


def resourcequota(rv):
    hard = {f"requests.{H200}": "4", "requests.cpu": "32"}
    return (meta("project-quota", rv, namespace="acme-research")
            + " spec { " + quantities("hard", hard) + " }"
            + " status { " + quantities("hard", hard) + " "
            + quantities("used", {f"requests.{H200}": "3", "requests.cpu": "8500m"}) + " }")


KINDS = {
    # kind: (message, list message, object text at a resourceVersion)
    "Node": ("Node", node),
    "Pod": ("Pod", pod),
    "Namespace": ("Namespace", namespace),
    "ResourceQuota": ("ResourceQuota", resourcequota),
}


def unknown(kind, raw):
    # runtime.Unknown as the API server writes it (empty contentEncoding and contentType).
    return b"k8s\0" + protoc("Unknown", f'typeMeta {{ apiVersion: "v1" kind: {text(kind)} }} raw: {quoted(raw)} '
                                        'contentEncoding: "" contentType: ""')


def frame(event_type, object_bytes):
    event = protoc("WatchEvent", f"type: {text(event_type)} object {{ raw: {quoted(object_bytes)} }}")
    return struct.pack(">I", len(event)) + event


def status_gone():
    return protoc("Status", 'metadata { } status: "Failure" message: "too old resource version: 100 (212)" '
                            'reason: "Expired" details { retryAfterSeconds: 1 } code: 410')


def list_body(kind, objects, rv="200", cont=""):
    # A LIST answer is the envelope alone: "k8s\0" + Unknown{raw = <Kind>List}, and
    # <Kind>List is {metadata = 1 (ListMeta), items = 2 (repeated <Kind>)}: the
    # proto declares PodList only, the others share its field numbers.
    list_bytes = protoc("PodList", f"metadata {{ resourceVersion: {text(rv)} continue: {text(cont)} }}")
    list_bytes += b"".join(b"\x12" + varint(len(o)) + o for o in objects)
    return b"k8s\0" + protoc("Unknown", f'typeMeta {{ apiVersion: "v1" kind: {text(kind + "List")} }} '
                                        f'raw: {quoted(list_bytes)} contentEncoding: "" contentType: ""')


def varint(n):
    out = b""
    while True:
        b = n & 0x7F
        n >>= 7
        if n:
            out += bytes([b | 0x80])
        else:
            return out + bytes([b])


def bookmark(kind, rv):
    # A bookmark carries the kind's object with only metadata (resourceVersion
    # and the initial-events-end annotation).
    return protoc(kind, f'metadata {{ resourceVersion: {text(str(rv))} annotations {{ '
                        'key: "k8s.io/initial-events-end" value: "true" } }')


def protobuf_seeds():
    out = HERE / "watch-protobuf-corpus"
    for n, (kind, (message, make)) in enumerate(KINDS.items()):
        added, modified, deleted = (protoc(message, make(rv)) for rv in (201, 205, 212))
        stream = (frame("ADDED", unknown(kind, added)) + frame("MODIFIED", unknown(kind, modified))
                  + frame("BOOKMARK", unknown(kind, bookmark(message, 209))) + frame("DELETED", unknown(kind, deleted)))
        if n == 0:
            stream += frame("ERROR", unknown("Status", status_gone()))
        piece = [0, 1, 5, 63][n % 4]
        write(out, f"{kind.lower()}-watch.pb", piece, stream)
        write(out, f"{kind.lower()}-list.pb", 63,
              list_body(kind, [protoc(message, make(199)), protoc(message, make(198))], cont="eyJydiI6MjAwfQ"))
    # A pod that has finished (the informers' field selector drops it from then on).
    write(out, "pod-succeeded-watch.pb", 5, frame("MODIFIED", unknown("Pod", protoc("Pod", pod(220, "Succeeded")))))
    write(out, "empty-list.pb", 63, list_body("Pod", [], rv="7"))
    # The first frames the API server sent in runtime/test/testdata/pods_watch.pb (a recorded watch).
    golden = (ROOT / "runtime" / "test" / "testdata" / "pods_watch.pb").read_bytes()
    end = 0
    for _ in range(2):
        end += 4 + struct.unpack(">I", golden[end:end + 4])[0]
    write(out, "golden-pods-watch.pb", 5, golden[:end])


if __name__ == "__main__":
    json_seeds()
    protobuf_seeds()
