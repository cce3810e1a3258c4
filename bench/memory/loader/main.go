// Command tally-bench-pods fills a test cluster with bound pods for the memory
// bench (bench/memory/run.sh): --pods pods spread round-robin over the nodes
// whose names start with --node-prefix, in --namespaces namespaces, bound
// through spec.nodeName like pods a kubelet already runs. On every node the
// first --gpu-per-node pods ask for one GPU of the node's resource
// (--resource), the others only CPU and memory, as in a cluster where GPU
// nodes also run their system and CPU workloads.
//
// Test tooling only: bench/memory/run.sh builds it inside the control plane's
// Go module cache (the client-go kube-apiserver was built with; nothing is
// downloaded) and never ships it.
//
//	tally-bench-pods --kubeconfig K --pods 75000 --node-prefix mem-h200- --name-prefix h200 --parallel 32
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"
)

func main() {
	kubeconfig := flag.String("kubeconfig", os.Getenv("KUBECONFIG"), "kubeconfig file (default $KUBECONFIG)")
	pods := flag.Int("pods", 150000, "pods to create")
	nodePrefix := flag.String("node-prefix", "", "spread the pods over the nodes whose name starts with this")
	namespaces := flag.Int("namespaces", 100, "namespaces the pods are spread over (bench-mem-<i>)")
	gpuPerNode := flag.Int("gpu-per-node", 4, "pods per node that ask for one GPU of --resource")
	gpuResource := flag.String("resource", "nvidia.com/GH100_H200_SXM_141GB", "GPU resource name")
	parallel := flag.Int("parallel", 64, "concurrent requests")
	clients := flag.Int("clients", 4, "API clients (HTTP/2 connections) the requests are spread over")
	qps := flag.Float64("qps", 100000, "client-side request rate limit per client")
	namePrefix := flag.String("name-prefix", "p", "pod names are <name-prefix>-<app>-<hash>-<index>")
	timeout := flag.Duration("timeout", 30*time.Minute, "overall timeout")
	flag.Parse()
	if err := run(*kubeconfig, *pods, *nodePrefix, *namespaces, *gpuPerNode, *gpuResource, *namePrefix, *parallel,
		*clients, *qps, *timeout); err != nil {
		fmt.Fprintf(os.Stderr, "tally-bench-pods: %v\n", err)
		os.Exit(1)
	}
}

func run(kubeconfig string, pods int, nodePrefix string, namespaces, gpuPerNode int, gpuResource, namePrefix string,
	parallel, clients int, qps float64, timeout time.Duration) error {
	if kubeconfig == "" {
		return errors.New("no kubeconfig: pass --kubeconfig or set KUBECONFIG")
	}
	if clients < 1 || namespaces < 1 {
		return errors.New("--clients and --namespaces must be >= 1")
	}
	var cs []*kubernetes.Clientset
	for c := 0; c < clients; c++ {
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS = float32(qps)
		cfg.Burst = int(qps)
		cfg.ContentType = "application/vnd.kubernetes.protobuf"
		cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
		cfg.UserAgent = fmt.Sprintf("tally-bench-pods/%d", c)
		// A dialer of its own makes client-go build this client its own
		// transport (it shares one between equal configs): a connection each.
		cfg.Dial = (&net.Dialer{Timeout: 30 * time.Second, KeepAlive: 30 * time.Second}).DialContext
		client, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return err
		}
		cs = append(cs, client)
	}
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()

	list, err := cs[0].CoreV1().Nodes().List(ctx, metav1.ListOptions{ResourceVersion: "0"})
	if err != nil {
		return fmt.Errorf("listing nodes: %w", err)
	}
	var nodes []string
	for _, n := range list.Items {
		if strings.HasPrefix(n.Name, nodePrefix) {
			nodes = append(nodes, n.Name)
		}
	}
	if len(nodes) == 0 {
		return fmt.Errorf("no node named %s*", nodePrefix)
	}
	sort.Strings(nodes)

	began := time.Now()
	err = forEach(namespaces, parallel, func(i int) error {
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("bench-mem-%d", i),
			Labels: map[string]string{"tally.dev/fixture": "true"}}}
		_, err := cs[i%clients].CoreV1().Namespaces().Create(ctx, ns, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("namespace %s: %w", ns.Name, err)
		}
		return nil
	})
	if err != nil {
		return err
	}

	cpu := resource.MustParse("500m")
	mem := resource.MustParse("1Gi")
	one := resource.MustParse("1")
	var gpuPods atomic.Int64
	build := func(i int) *corev1.Pod {
		node := nodes[i%len(nodes)]
		slot := i / len(nodes) // the how-many-th pod of its node
		app := fmt.Sprintf("app-%d", i%997)
		requests := corev1.ResourceList{corev1.ResourceCPU: cpu, corev1.ResourceMemory: mem}
		limits := corev1.ResourceList{corev1.ResourceMemory: mem}
		if slot < gpuPerNode {
			requests[corev1.ResourceName(gpuResource)] = one
			limits[corev1.ResourceName(gpuResource)] = one
			gpuPods.Add(1)
		}
		return &corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{
				Name:      fmt.Sprintf("%s-%s-%x-%d", namePrefix, app, i%4096, i),
				Namespace: fmt.Sprintf("bench-mem-%d", i%namespaces),
				Labels:    map[string]string{"app": app, "pod-template-hash": fmt.Sprintf("%x", i%4096), "tier": "bench"},
				Annotations: map[string]string{
					"kubectl.kubernetes.io/default-container": "main",
				},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: app,
					UID: types.UID(fmt.Sprintf("00000000-0000-4000-8000-%012d", i%997))}},
			},
			Spec: corev1.PodSpec{
				NodeName:                      node,
				TerminationGracePeriodSeconds: new(int64),
				Containers: []corev1.Container{{
					Name:      "main",
					Image:     "registry.invalid/tally/bench:1",
					Args:      []string{"--serve", "--port=8080"},
					Env:       []corev1.EnvVar{{Name: "APP", Value: app}, {Name: "SLOT", Value: fmt.Sprint(slot)}},
					Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
					Resources: corev1.ResourceRequirements{Requests: requests, Limits: limits},
				}},
			},
		}
	}
	var done atomic.Int64
	stop := make(chan struct{})
	go func() { // progress on stderr every 10 s
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Second):
				n := done.Load()
				fmt.Fprintf(os.Stderr, "tally-bench-pods: %d/%d pods, %.0f/s\n", n, pods,
					float64(n)/time.Since(began).Seconds())
			}
		}
	}()
	err = forEach(pods, parallel, func(i int) error {
		p := build(i)
		_, err := cs[i%clients].CoreV1().Pods(p.Namespace).Create(ctx, p, metav1.CreateOptions{})
		if err != nil && !apierrors.IsAlreadyExists(err) {
			return fmt.Errorf("pod %s/%s: %w", p.Namespace, p.Name, err)
		}
		done.Add(1)
		return nil
	})
	close(stop)
	if err != nil {
		return err
	}
	s := time.Since(began).Seconds()
	// The one line run.sh reads.
	fmt.Printf("created %d pods (%d asking for a GPU) on %d nodes in %d namespaces in %.1f s (%.0f pods/s)\n",
		pods, gpuPods.Load(), len(nodes), namespaces, s, float64(pods)/s)
	return nil
}

// forEach runs fn(i) for i in [0,n) on `parallel` goroutines; it stops at the
// first error and returns it.
func forEach(n, parallel int, fn func(i int) error) error {
	if parallel < 1 {
		parallel = 1
	}
	var next atomic.Int64
	var once sync.Once
	var first error
	var failed atomic.Bool
	var wg sync.WaitGroup
	for w := 0; w < parallel; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for !failed.Load() {
				i := int(next.Add(1) - 1)
				if i >= n {
					return
				}
				if err := fn(i); err != nil {
					once.Do(func() { first = err; failed.Store(true) })
				}
			}
		}()
	}
	wg.Wait()
	return first
}
