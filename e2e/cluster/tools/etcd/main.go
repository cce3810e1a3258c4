// Package main only anchors the etcd wrapper module.
package main

import _ "go.etcd.io/etcd/server/v3/etcdmain"

func main() {}
