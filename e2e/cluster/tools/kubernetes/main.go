// Package main only anchors the wrapper module; the binaries are built from
// k8s.io/kubernetes/cmd/... through this module's dependency graph.
package main

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver/app"
	_ "k8s.io/kubernetes/cmd/kube-scheduler/app"
)

func main() {}
