// go-peer: a plain Go scheduler extender used only as a latency yardstick for
// tally-extender. It decodes requests with encoding/json into the same shapes
// the kube-scheduler sends (Go field names), and filters and scores with a
// simplified rule: a node passes when it is in the pool's mode and has enough
// free devices. Test tooling, not product code.
package main

import (
	"encoding/json"
	"flag"
	"fmt"
	"log"
	"net/http"
	"os"
	"strconv"
)

type quantityMap map[string]string

type container struct {
	Resources struct {
		Requests quantityMap `json:"requests"`
		Limits   quantityMap `json:"limits"`
	} `json:"resources"`
}

type pod struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
		UID       string `json:"uid"`
	} `json:"metadata"`
	Spec struct {
		Containers []container `json:"containers"`
	} `json:"spec"`
}

type node struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
}

type extenderArgs struct {
	Pod       *pod
	Nodes     *struct{ Items []node }
	NodeNames *[]string
}

type filterResult struct {
	Nodes                      *struct{ Items []node }
	NodeNames                  *[]string
	FailedNodes                map[string]string
	FailedAndUnresolvableNodes map[string]string
	Error                      string
}

type hostPriority struct {
	Host  string
	Score int64
}

type poolNode struct {
	Name        string `json:"name"`
	Mode        string `json:"mode"`
	Resource    string `json:"resource"`
	Allocatable int64  `json:"allocatable"`
	Used        int64  `json:"used"`
}

type cluster struct {
	Nodes  []poolNode `json:"nodes"`
	Mode   string     `json:"mode"`
	byName map[string]*poolNode
}

func (c *cluster) demand(p *pod, resource string) int64 {
	var total int64
	for _, ctr := range p.Spec.Containers {
		q := ctr.Resources.Requests[resource]
		if q == "" {
			q = ctr.Resources.Limits[resource]
		}
		n, _ := strconv.ParseInt(q, 10, 64)
		total += n
	}
	return total
}

func names(args *extenderArgs) []string {
	if args.NodeNames != nil {
		return *args.NodeNames
	}
	var out []string
	if args.Nodes != nil {
		for _, n := range args.Nodes.Items {
			out = append(out, n.Metadata.Name)
		}
	}
	return out
}

func main() {
	addr := flag.String("listen", "127.0.0.1:8890", "listen address")
	clusterFile := flag.String("cluster", "", "cluster JSON written by extender-latency --write-peer-cluster")
	flag.Parse()
	raw, err := os.ReadFile(*clusterFile)
	if err != nil {
		log.Fatal(err)
	}
	var c cluster
	if err := json.Unmarshal(raw, &c); err != nil {
		log.Fatal(err)
	}
	c.byName = map[string]*poolNode{}
	for i := range c.Nodes {
		c.byName[c.Nodes[i].Name] = &c.Nodes[i]
	}
	resource := "nvidia.com/GH100_H200_SXM_141GB"

	decode := func(w http.ResponseWriter, r *http.Request) (*extenderArgs, bool) {
		var args extenderArgs
		if err := json.NewDecoder(r.Body).Decode(&args); err != nil || args.Pod == nil {
			w.WriteHeader(http.StatusBadRequest)
			json.NewEncoder(w).Encode(map[string]string{"Error": fmt.Sprint(err)})
			return nil, false
		}
		return &args, true
	}
	http.HandleFunc("/filter", func(w http.ResponseWriter, r *http.Request) {
		args, ok := decode(w, r)
		if !ok {
			return
		}
		need := c.demand(args.Pod, resource)
		passed := []string{}
		res := filterResult{FailedNodes: map[string]string{}, FailedAndUnresolvableNodes: map[string]string{}}
		for _, name := range names(args) {
			n := c.byName[name]
			switch {
			case n == nil:
				res.FailedNodes[name] = "node " + name + " is not in the cache"
			case n.Mode != c.Mode:
				res.FailedAndUnresolvableNodes[name] = fmt.Sprintf("node %s (GPU mode '%s') serves no GPU class for %s", name, n.Mode, resource)
			case n.Allocatable-n.Used < need:
				res.FailedNodes[name] = fmt.Sprintf("node %s has %d of %d %s free; pod needs %d", name, n.Allocatable-n.Used, n.Allocatable, resource, need)
			default:
				passed = append(passed, name)
			}
		}
		res.NodeNames = &passed
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(res)
	})
	http.HandleFunc("/prioritize", func(w http.ResponseWriter, r *http.Request) {
		args, ok := decode(w, r)
		if !ok {
			return
		}
		need := c.demand(args.Pod, resource)
		out := []hostPriority{}
		for _, name := range names(args) {
			var score int64
			if n := c.byName[name]; n != nil && n.Allocatable > 0 && n.Mode == c.Mode {
				left := n.Allocatable - n.Used - need
				if left < 0 {
					left = 0
				}
				score = 10 * (n.Allocatable - left) / n.Allocatable
			}
			out = append(out, hostPriority{Host: name, Score: score})
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(out)
	})
	log.Printf("go-peer listening on %s with %d nodes", *addr, len(c.Nodes))
	log.Fatal(http.ListenAndServe(*addr, nil))
}
