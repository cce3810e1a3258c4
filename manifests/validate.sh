#!/usr/bin/env bash
# Checks Tally's manifests, the kind overlay and the Dockerfile without a cluster:
# YAML parses, every kustomization resource exists, `kubectl kustomize` renders
# (when a kubectl is found), CRD schemas look structural and carry every SPEC
# field, the scheduler configuration has the extender entry, workloads, RBAC and
# webhooks are consistent. Exits non-zero on any problem.
#
#   manifests/validate.sh            offline checks
#   manifests/validate.sh --server   also, against $KUBECONFIG (an API server with
#                                    the platform CRDs, e.g. e2e/cluster/up):
#                                    installs Tally's namespace, CRDs and RBAC, runs
#                                    `kubectl apply --dry-run=server -k manifests/`,
#                                    and checks the CEL rules, immutability and
#                                    status rules, webhook routing and RBAC with
#                                    scratch objects it removes
#                                    (in the namespace tally-validate, left empty)
#   manifests/validate.sh --scheduler  --server, then check-scheduler.sh: the real
#                                    kube-scheduler with the scheduler config under
#                                    the tally-scheduler account and a recording
#                                    stand-in extender
set -euo pipefail
here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(cd "$here/.." && pwd)"
server=0
sched=0
for arg in "$@"; do
  case "$arg" in
    --server) server=1 ;;
    --scheduler) server=1; sched=1 ;;
    *) echo "usage: $0 [--server] [--scheduler]" >&2; exit 2 ;;
  esac
done

# A python3 with PyYAML: the one on PATH, else Debian's (python3-yaml).
python=""
for candidate in python3 /usr/bin/python3; do
  if command -v "$candidate" >/dev/null && "$candidate" -c 'import yaml' 2>/dev/null; then
    python="$candidate"; break
  fi
done
[[ -n "$python" ]] || { echo "validate.sh: needs python3 with PyYAML (apt-get install python3-yaml)" >&2; exit 2; }

# Prefer the pinned kubectl built for the local control plane, then PATH.
kubectl=""
for candidate in "${TALLY_CACHE:-$HOME/.cache/tally}"/bin/*/kubectl; do
  [[ -x "$candidate" ]] && kubectl="$candidate"
done
[[ -n "$kubectl" ]] || kubectl="$(command -v kubectl || true)"

tmp="$(mktemp -d)"
trap 'rm -rf "$tmp"' EXIT
rendered="" rendered_kind="" rc=0
if [[ -n "$kubectl" ]]; then
  echo "kustomize: $kubectl ($("$kubectl" version --client 2>/dev/null | head -1))"
  # The checks read the complete set: the base (every webhook is served).
  : > "$tmp/full.yaml"
  for tree in ""; do
    if "$kubectl" kustomize "$here/$tree" > "$tmp/part.yaml" 2> "$tmp/err"; then
      echo "kustomize manifests/$tree: $(grep -c '^kind:' "$tmp/part.yaml") objects"
      { echo "---"; cat "$tmp/part.yaml"; } >> "$tmp/full.yaml"
    else
      echo "FAIL kustomize manifests/$tree: $(cat "$tmp/err")"; rc=1
    fi
  done
  ((rc)) || rendered="$tmp/full.yaml"
  if "$kubectl" kustomize "$root/e2e/kind" > "$tmp/kind.yaml" 2> "$tmp/err"; then
    rendered_kind="$tmp/kind.yaml"
    echo "kustomize e2e/kind/: $(grep -c '^kind:' "$rendered_kind") objects"
  else
    echo "FAIL kustomize e2e/kind/: $(cat "$tmp/err")"; rc=1
  fi
else
  echo "kustomize: no kubectl found; checking the kustomization trees directly"
fi

"$python" "$here/validate.py" "$root" "$rendered" "$rendered_kind" || rc=1

if (( server )); then
  [[ -n "$kubectl" ]] || { echo "FAIL --server: no kubectl"; exit 1; }
  k() { "$kubectl" "$@"; }
  # Real writes, all idempotent: Tally's namespace and CRDs (dry-run cannot
  # register a CRD or create the namespace the rest lives in), and a scratch
  # namespace for the custom-resource checks, removed at the end.
  k get namespace kube-dc >/dev/null 2>&1 ||
    echo "note: namespace kube-dc is missing; the kube-dc RoleBinding will be refused"
  k apply --server-side -f "$here/namespace.yaml" -f "$here/crds/" >/dev/null
  k wait --for=condition=Established --timeout=60s \
    crd/gpudeviceclasses.gpu.tally.dev crd/gpudevices.gpu.tally.dev >/dev/null
  if k apply --server-side --dry-run=server -k "$here" > "$tmp/server" 2>&1; then
    echo "server dry-run: $(grep -c "(server dry run)" "$tmp/server") objects accepted"
    # tally-system enforces and warns Pod Security "restricted".
    if grep -i "warning" "$tmp/server"; then
      echo "FAIL server dry-run: warnings (Pod Security or deprecations) above"; rc=1
    fi
  else
    echo "FAIL server dry-run:"; cat "$tmp/server"; rc=1
  fi
  scratch=tally-validate
  # With Tally's own webhooks installed, custom resources would be judged by a
  # running (or absent) Tally instead of by the schemas under test.
  installed="$(k get validatingwebhookconfigurations,mutatingwebhookconfigurations -o name 2>/dev/null |
    grep '/tally-' | grep -v '/tally-validate-probe-' || true)"
  if [[ -n "$installed" ]]; then
    echo "note: Tally's webhook configurations are installed here; skipping the object checks"
    if (( rc == 0 )); then echo "validate.sh: OK"; else echo "validate.sh: FAILED"; fi
    exit "$rc"
  fi
  k create namespace "$scratch" --dry-run=client -o yaml | k apply -f - >/dev/null
  server_checks=0
  expect() { # ok|refused|refused-by:<webhook> what verb... (object on stdin when the verb reads -f -)
    local want="$1" what="$2" by=""; shift 2
    [[ "$want" == refused-by:* ]] && { by="${want#refused-by:}"; want=refused; }
    server_checks=$((server_checks + 1))
    if "$kubectl" "$@" > "$tmp/out" 2>&1; then got=ok; else got=refused; fi
    if [[ "$got" != "$want" ]]; then
      echo "FAIL server: $what: expected $want, got $got: $(tr '\n' ' ' < "$tmp/out")"; rc=1
    elif [[ -n "$by" ]] && ! grep -q "\"$by\"" "$tmp/out"; then
      echo "FAIL server: $what: expected a refusal by $by, got: $(tr '\n' ' ' < "$tmp/out")"; rc=1
    fi
  }
  cls() { # name spec-yaml (indented two spaces)
    printf 'apiVersion: gpu.tally.dev/v1alpha1\nkind: GPUDeviceClass\nmetadata:\n  name: %s\nspec:\n%s\n' "$1" "$2"
  }
  expect_cls() { # ok|refused what name spec-yaml
    cls "$3" "$4" > "$tmp/obj.yaml"
    expect "$1" "$2" create --dry-run=server -f "$tmp/obj.yaml"
  }
  base='  workload: vm
  allocation: passthrough
  resourceName: nvidia.com/GH100_H200_SXM_141GB'
  shared='  workload: pod
  allocation: shared
  resourceName: nvidia.com/gpu
  memoryMiB: 16384'
  share='  share: {memoryMiB: 8192, corePercent: 25, maxSharesPerDevice: 4}'
  sed "s/namespace: tenant-a/namespace: $scratch/" "$here/samples/gpudevice.yaml" > "$tmp/device.yaml"
  expect ok "samples accepted" create --dry-run=server -f "$here/samples/gpudeviceclasses.yaml" -f "$tmp/device.yaml"
  expect_cls refused "shared class without share" v-shared-no-share "$shared"
  expect_cls refused "shared class without memoryMiB" v-shared-no-mem "$(printf '  workload: pod\n  allocation: shared\n  resourceName: nvidia.com/gpu\n%s' "$share")"
  expect_cls refused "passthrough class with share" v-pt-share "$(printf '%s\n%s' "$base" "$share")"
  expect_cls refused "shared class for VMs" v-shared-vm "$(printf '%s\n%s' "${shared/workload: pod/workload: vm}" "$share")"
  expect_cls refused "vgpu class for pods" v-vgpu-pod "$(printf '  workload: pod\n  allocation: vgpu\n  resourceName: nvidia.com/A100-10C')"
  expect_cls refused "vm class on pod-hami nodes" v-mode "$(printf '%s\n  nodeMode: pod-hami' "$base")"
  expect_cls refused "share larger than the GPU" v-big-share "$(printf '%s\n  share: {memoryMiB: 32768, corePercent: 25, maxSharesPerDevice: 4}' "$shared")"
  expect_cls refused "spare 0 without pilot approval" v-spare0 "$(printf '%s\n  operatorSpareDevices: 0' "$base")"
  expect_cls ok "spare 0 with pilot approval" v-spare0-pilot "$(printf '%s\n  operatorSpareDevices: 0\n  singleDevicePilotApproved: true' "$base")"
  expect_cls refused "bad pciVendorSelector" v-pci "$(printf '%s\n  pciVendorSelector: 10de:2335x' "$base")"
  expect_cls refused "resourceName without a domain" v-name "$(printf '  workload: vm\n  allocation: passthrough\n  resourceName: GH100')"
  expect_cls refused "two sre acknowledgements of one failure" v-acks "$(printf '%s\n  gateAcknowledgements:\n  - {failureId: f1, role: sre, identity: a}\n  - {failureId: f1, role: sre, identity: b}' "$base")"
  expect_cls ok "product and sre acknowledgements" v-acks-ok "$(printf '%s\n  gateAcknowledgements:\n  - {failureId: f1, role: sre, identity: a}\n  - {failureId: f1, role: product, identity: b, at: "2026-01-01T00:00:00Z"}' "$base")"
  # Immutability and status rules need real objects.
  k delete gpudeviceclass tally-validate-class --ignore-not-found >/dev/null
  cls tally-validate-class "$base" | k create -f - >/dev/null
  expect refused "class allocation immutable" patch gpudeviceclass tally-validate-class --type=merge -p '{"spec":{"allocation":"vgpu"}}'
  expect refused "class resourceName immutable" patch gpudeviceclass tally-validate-class --type=merge -p '{"spec":{"resourceName":"nvidia.com/x"}}'
  expect ok "class maxCount mutable" patch gpudeviceclass tally-validate-class --type=merge -p '{"spec":{"maxCount":4}}'
  expect ok "class status with negative headroom" patch gpudeviceclass tally-validate-class --subresource=status --type=merge \
    -p '{"status":{"headroom":-3,"healthySchedulableDevices":4,"conditions":[{"type":"InvariantHolds","status":"False","reason":"Oversold","message":"4 < 7","lastTransitionTime":"2026-01-01T00:00:00Z"}]}}'
  k -n "$scratch" delete gpudevice h200-pair --ignore-not-found >/dev/null
  k -n "$scratch" create -f "$tmp/device.yaml" >/dev/null
  expect refused "device class immutable" -n "$scratch" patch gpudevice h200-pair --type=merge -p '{"spec":{"class":"other"}}'
  expect refused "device count immutable" -n "$scratch" patch gpudevice h200-pair --type=merge -p '{"spec":{"count":3}}'
  expect refused "device count 65" -n "$scratch" patch gpudevice h200-pair --type=merge -p '{"spec":{"count":65}}'
  expect refused "Bound without node" -n "$scratch" patch gpudevice h200-pair --subresource=status --type=merge -p '{"status":{"phase":"Bound"}}'
  expect refused "Attached without attachedTo" -n "$scratch" patch gpudevice h200-pair --subresource=status --type=merge -p '{"status":{"phase":"Attached","node":"n1"}}'
  expect refused "unknown phase" -n "$scratch" patch gpudevice h200-pair --subresource=status --type=merge -p '{"status":{"phase":"Running","node":"n1"}}'
  expect ok "Attached with node and VMI" -n "$scratch" patch gpudevice h200-pair --subresource=status --type=merge \
    -p '{"status":{"phase":"Attached","node":"n1","attachedTo":{"namespace":"'"$scratch"'","name":"vm1","uid":"u1"}}}'
  # Webhook routing: copies of Tally's webhook configurations, limited to the
  # scratch namespace and pointing at a Service that does not exist, play "Tally
  # is down". Objects the matchConditions send must be refused (fail closed);
  # everything else must pass untouched.
  "$python" - "$rendered" "$scratch" > "$tmp/probe.yaml" <<'PY'
import sys, yaml
src, ns = sys.argv[1], sys.argv[2]
out = []
for d in yaml.safe_load_all(open(src)):
    if d and d.get("kind") in ("ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"):
        d["metadata"] = {"name": "tally-validate-probe-" + d["metadata"]["name"]}
        for w in d["webhooks"]:
            w["namespaceSelector"] = {"matchLabels": {"kubernetes.io/metadata.name": ns}}
            w["clientConfig"]["service"].update({"name": "tally-validate-absent", "namespace": ns})
        out.append(d)
yaml.safe_dump_all(out, sys.stdout)
PY
  # An Organization to update once the probes are in (created before them).
  k -n "$scratch" delete organization tally-validate-org --ignore-not-found >/dev/null
  printf '{"apiVersion":"kube-dc.com/v1","kind":"Organization","metadata":{"name":"tally-validate-org","namespace":"%s","annotations":{"billing.kube-dc.com/addons":"[]"}},"spec":{"displayName":"v"}}' \
    "$scratch" | k create -f - >/dev/null
  if [[ -n "$rendered" ]] && k apply -f "$tmp/probe.yaml" >/dev/null; then
    pod() { # name owner-references-json resources-json [init-resources-json]
      local init=""
      [[ -n "${4:-}" ]] && init=',"initContainers":[{"name":"i","image":"x","resources":'"$4"'}]'
      printf '{"apiVersion":"v1","kind":"Pod","metadata":{"name":"%s","namespace":"%s","ownerReferences":%s},"spec":{"containers":[{"name":"c","image":"x","resources":%s}]%s}}' \
        "$1" "$scratch" "$2" "$3" "$init" > "$tmp/obj.yaml"
    }
    vmi_owner='[{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","name":"vm1","uid":"00000000-0000-0000-0000-000000000001","controller":true}]'
    vmi() { # name annotations-json devices-json
      printf '{"apiVersion":"kubevirt.io/v1","kind":"VirtualMachineInstance","metadata":{"name":"%s","namespace":"%s","annotations":%s},"spec":{"domain":{"devices":%s}}}' \
        "$1" "$scratch" "$2" "$3" > "$tmp/obj.yaml"
    }
    sleep 2 # the API server picks webhook configurations up from its informer
    pod plain '[]' '{"requests":{"cpu":"1"}}'
    expect ok "ordinary pod not sent to Tally" create --dry-run=server -f "$tmp/obj.yaml"
    pod noresources '[]' '{}'
    expect ok "pod without resources not sent" create --dry-run=server -f "$tmp/obj.yaml"
    # Limits only: defaulting copies them into requests before admission.
    pod gpu '[]' '{"limits":{"nvidia.com/gpu":"1"}}'
    expect refused-by:gpu-pods.mutate.gpu.tally.dev "GPU pod sent to Tally's placement door (fail closed)" create --dry-run=server -f "$tmp/obj.yaml"
    # Any vendor a class may sell, not a list of three.
    pod gaudi '[]' '{"limits":{"habana.ai/gaudi2":"1"}}'
    expect refused-by:gpu-pods.mutate.gpu.tally.dev "another vendor's GPU pod sent to Tally" create --dry-run=server -f "$tmp/obj.yaml"
    pod vgpu '[]' '{"requests":{"cpu":"1"}}' '{"requests":{"nvidia.com/A100-10C":"1"},"limits":{"nvidia.com/A100-10C":"1"}}'
    expect refused-by:gpu-pods.mutate.gpu.tally.dev "GPU in an init container sent to Tally" create --dry-run=server -f "$tmp/obj.yaml"
    pod launcher "$vmi_owner" '{"requests":{"memory":"1Gi"}}'
    expect ok "launcher pod without GPUs not sent" create --dry-run=server -f "$tmp/obj.yaml"
    pod launcher-gpu "$vmi_owner" '{"limits":{"nvidia.com/GH100_H200_SXM_141GB":"1"}}'
    expect refused-by:launcher-pods.mutate.gpu.tally.dev "launcher pod with GPUs sent to Tally's launcher webhook" create --dry-run=server -f "$tmp/obj.yaml"
    vmi plain '{}' '{"disks":[]}'
    expect ok "VMI without Tally annotations not sent" create --dry-run=server -f "$tmp/obj.yaml"
    vmi nodevices '{"app":"x"}' 'null'
    expect ok "VMI without spec.domain.devices not sent" create --dry-run=server -f "$tmp/obj.yaml"
    vmi gpus '{}' '{"gpus":[{"name":"g1","deviceName":"nvidia.com/GH100_H200_SXM_141GB"}]}'
    expect ok "VMI asking for gpus without Tally annotations not sent" create --dry-run=server -f "$tmp/obj.yaml"
    vmi held '{"gpu.tally.dev/devices":"h200-pair"}' '{}'
    expect refused-by:virtualmachineinstances.mutate.gpu.tally.dev "VMI with held devices sent to Tally" create --dry-run=server -f "$tmp/obj.yaml"
    vmi templates '{"gpu.tally.dev/device-templates":"[{\"class\":\"c\",\"count\":1}]"}' '{}'
    expect refused-by:virtualmachineinstances.mutate.gpu.tally.dev "VMI with device templates sent to Tally" create --dry-run=server -f "$tmp/obj.yaml"
    expect refused-by:gpudevices.validate.gpu.tally.dev "GPUDevice order sent to Tally" -n "$scratch" create --dry-run=server -f "$tmp/device.yaml"
    expect ok "Organization update without an add-on change not sent" -n "$scratch" patch organization tally-validate-org \
      --dry-run=server --type=merge -p '{"spec":{"displayName":"w"}}'
    expect refused-by:organizations.validate.gpu.tally.dev "Organization add-on change sent to Tally" -n "$scratch" \
      patch organization tally-validate-org --dry-run=server --type=merge \
      -p '{"metadata":{"annotations":{"billing.kube-dc.com/addons":"[{\"addonId\":\"a\",\"quantity\":1}]"}}}'
    org() { # name annotations-json
      printf '{"apiVersion":"kube-dc.com/v1","kind":"Organization","metadata":{"name":"%s","namespace":"%s","annotations":%s},"spec":{"displayName":"v"}}' \
        "$1" "$scratch" "$2" > "$tmp/obj.yaml"
    }
    org tally-validate-new-org '{}'
    expect ok "Organization created without add-ons not sent" create --dry-run=server -f "$tmp/obj.yaml"
    org tally-validate-new-org '{"billing.kube-dc.com/addons":"[{\"addonId\":\"a\",\"quantity\":1}]"}'
    expect refused-by:organizations.validate.gpu.tally.dev "Organization created with add-ons sent to Tally" \
      create --dry-run=server -f "$tmp/obj.yaml"
    expect ok "class update without an acknowledgement change not sent" patch gpudeviceclass tally-validate-class \
      --dry-run=server --type=merge -p '{"spec":{"maxCount":5}}'
    expect refused-by:gpudeviceclasses.validate.gpu.tally.dev "acknowledgement sent to Tally" \
      patch gpudeviceclass tally-validate-class --dry-run=server --type=merge \
      -p '{"spec":{"gateAcknowledgements":[{"failureId":"f1","role":"sre","identity":"a"}]}}'
    k delete -f "$tmp/probe.yaml" --ignore-not-found >/dev/null
    k -n "$scratch" delete organization tally-validate-org --ignore-not-found >/dev/null
  else
    echo "FAIL server: could not install the webhook probe configurations"; rc=1
  fi
  # RBAC as the API server's authorizer sees it (the roles are applied for real;
  # they are exactly what `kubectl apply -k` creates).
  # The controller's draft RBAC is applied with the base's, so it stays checked.
  if k get namespace kube-dc >/dev/null 2>&1 && k apply --server-side -k "$here/rbac" >/dev/null &&
     k apply --server-side -f "$here/controller/rbac.yaml" >/dev/null; then
    can() { # yes|no account verb resource [flags...]
      local want="$1" sa="$2" got; shift 2
      server_checks=$((server_checks + 1))
      got="$("$kubectl" auth can-i --as="system:serviceaccount:tally-system:$sa" "$@" 2>/dev/null || true)"
      [[ "$got" == "$want" ]] || { echo "FAIL server: rbac: $sa $*: expected $want, got $got"; rc=1; }
    }
    can yes tally-extender list nodes
    can yes tally-extender watch pods -A
    can yes tally-extender create pods --subresource=binding -n "$scratch"
    can yes tally-extender list hierarchicalresourcequotas.hnc.x-k8s.io -A
    can yes tally-extender watch virtualmachineinstances.kubevirt.io -A
    can yes tally-extender watch gpudeviceclasses.gpu.tally.dev
    can yes tally-extender create events -n "$scratch"
    can no tally-extender update gpudevices.gpu.tally.dev -n "$scratch"
    can no tally-extender create pods -n "$scratch"
    can no tally-extender get secrets -n tally-system
    can no tally-extender create leases.coordination.k8s.io -n tally-system
    # tally-controller: its informers, Lease, Secret, its own webhook and the binder
    # configuration; of GPU objects only what the binder writes.
    can yes tally-controller watch gpudevices.gpu.tally.dev -A
    can yes tally-controller watch virtualmachineinstances.kubevirt.io -A
    can yes tally-controller get virtualmachineinstances.kubevirt.io -n "$scratch"
    can yes tally-controller watch organizations.kube-dc.com -A
    # The device binder: a device read before each write, its finalizer, its status, Events.
    can yes tally-controller patch gpudevices.gpu.tally.dev --subresource=status -n "$scratch"
    can no tally-controller update gpudevices.gpu.tally.dev --subresource=status -n "$scratch"
    can yes tally-controller get gpudevices.gpu.tally.dev -n "$scratch"
    can yes tally-controller patch gpudevices.gpu.tally.dev -n "$scratch"
    can yes tally-controller create events -n "$scratch"
    can no tally-controller patch events -n "$scratch"
    # The VMI webhook creates template devices; it and the binder delete them.
    can yes tally-controller create gpudevices.gpu.tally.dev -n "$scratch"
    can yes tally-controller delete gpudevices.gpu.tally.dev -n "$scratch"
    can no tally-controller update gpudevices.gpu.tally.dev -n "$scratch"
    can no tally-controller deletecollection gpudevices.gpu.tally.dev -n "$scratch"
    can no tally-controller patch gpudeviceclasses.gpu.tally.dev
    can yes tally-controller watch kubevirts.kubevirt.io -A
    can no tally-controller patch kubevirts.kubevirt.io -n kubevirt
    can no tally-controller patch virtualmachineinstances.kubevirt.io -n "$scratch"
    can no tally-controller get pods -n "$scratch"
    can no tally-controller patch pods -n "$scratch"
    can no tally-controller create hierarchicalresourcequotas.hnc.x-k8s.io -n "$scratch"
    can no tally-controller patch organizations.kube-dc.com -n "$scratch"
    can yes tally-controller patch validatingwebhookconfigurations/tally-gpudevice-validating
    can no tally-controller patch validatingwebhookconfigurations/someone-else
    can yes tally-controller watch validatingwebhookconfigurations
    can yes tally-controller patch mutatingwebhookconfigurations/tally-vmi-mutating
    can yes tally-controller patch mutatingwebhookconfigurations/tally-launcher-pod-mutating
    can yes tally-controller patch mutatingwebhookconfigurations/tally-pod-placement-mutating
    can yes tally-controller patch validatingwebhookconfigurations/tally-gpu-pod-validating
    can yes tally-controller patch validatingwebhookconfigurations/tally-organization-validating
    # The quota controller: plan-quota and project-quota by apply, Organization status.
    can yes tally-controller patch hierarchicalresourcequotas.hnc.x-k8s.io -n "$scratch"
    can yes tally-controller patch resourcequotas -n "$scratch"
    can yes tally-controller patch organizations.kube-dc.com --subresource=status -n "$scratch"
    can no tally-controller patch mutatingwebhookconfigurations/someone-else
    can yes tally-controller watch mutatingwebhookconfigurations
    can yes tally-controller patch leases.coordination.k8s.io/tally-controller -n tally-system
    can no tally-controller patch leases.coordination.k8s.io/tally-scheduler -n tally-system
    can yes tally-controller get secrets/tally-webhook-tls -n tally-system
    can yes tally-controller update secrets/tally-webhook-tls -n tally-system
    can no tally-controller get secrets/someone-else -n tally-system
    can yes tally-controller watch configmaps -n kube-dc
    can yes tally-controller update configmaps/tally-usage-20270101 -n tally-usage
    can yes tally-controller create configmaps -n tally-usage
    can yes tally-controller list configmaps -n tally-usage
    # Not the scheduler's configuration, nor any other ConfigMap of tally-system.
    can no tally-controller update configmaps/tally-scheduler-config -n tally-system
    can no tally-controller create configmaps -n tally-system
    can no tally-controller update configmaps -n tally-system
    can no tally-controller watch configmaps -n "$scratch"
    # Tenants (tally-gpudevice-tenant, aggregated into edit and admin; bound
    # here directly): order and release devices, never write their status.
    k create rolebinding tally-validate-tenant -n "$scratch" --clusterrole=tally-gpudevice-tenant \
      --serviceaccount=tally-system:tenant --dry-run=client -o yaml | k apply -f - >/dev/null
    can yes tenant create gpudevices.gpu.tally.dev -n "$scratch"
    can yes tenant delete gpudevices.gpu.tally.dev -n "$scratch"
    can no tenant patch gpudevices.gpu.tally.dev --subresource=status -n "$scratch"
    can no tenant update gpudevices.gpu.tally.dev --subresource=status -n "$scratch"
    k delete rolebinding tally-validate-tenant -n "$scratch" --ignore-not-found >/dev/null
    can no tally-controller create pods --subresource=binding -n "$scratch"
    can yes tally-scheduler create pods --subresource=binding -n "$scratch"
    can yes tally-scheduler update leases.coordination.k8s.io/tally-scheduler -n tally-system
    can yes tally-scheduler get configmaps/extension-apiserver-authentication -n kube-system
    can yes tally-scheduler list gpudevices.gpu.tally.dev -A
    can no tally-scheduler update gpudevices.gpu.tally.dev -n "$scratch"
  else
    echo "note: RBAC checks skipped (namespace kube-dc missing or rbac/ not applied)"
  fi
  k get gpudeviceclass tally-validate-class > "$tmp/columns" 2>&1 && k -n "$scratch" get gpudevice h200-pair >> "$tmp/columns" 2>&1
  echo "printer columns:"; sed 's/^/  /' "$tmp/columns"
  k delete gpudeviceclass tally-validate-class --ignore-not-found >/dev/null
  # The scratch namespace stays (empty): a control plane without
  # kube-controller-manager would never finish deleting it.
  k -n "$scratch" delete gpudevice h200-pair --ignore-not-found >/dev/null
  echo "server checks: $server_checks"
  if (( sched )); then
    KUBECONFIG="${KUBECONFIG:-}" "$here/check-scheduler.sh" || rc=1
  fi
fi

if (( rc == 0 )); then echo "validate.sh: OK"; else echo "validate.sh: FAILED"; fi
exit "$rc"
