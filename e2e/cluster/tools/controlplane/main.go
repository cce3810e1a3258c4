// Package main only anchors the control plane's wrapper module: one module for
// every pinned binary (Kubernetes' commands, etcd, kwok), so each package they
// share resolves to one version and compiles once. The binaries themselves are
// built from k8s.io/kubernetes/cmd/..., go.etcd.io/etcd/server/v3 and
// sigs.k8s.io/kwok/cmd/kwok through this module's dependency graph.
package main

import (
	_ "go.etcd.io/etcd/server/v3/etcdmain"
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
	_ "sigs.k8s.io/kwok/pkg/kwok/cmd"
)

func main() {}
