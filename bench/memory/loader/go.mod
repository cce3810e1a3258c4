module tally.dev/bench/podloader

go 1.26.0

// Built inside the control plane's wrapper module by bench/memory/run.sh (the
// client-go kube-apiserver was built with); keep equal to versions.env.
require (
	k8s.io/api v0.37.2
	k8s.io/apimachinery v0.37.2
	k8s.io/client-go v0.37.2
)
