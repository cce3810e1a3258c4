// Package main only anchors the kwok wrapper module.
package main

import _ "sigs.k8s.io/kwok/pkg/kwok/cmd"

func main() {}
