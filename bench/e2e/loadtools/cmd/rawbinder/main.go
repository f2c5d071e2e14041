// rawbinder binds every pending pod of its scheduler name to the next node,
// round-robin, with no scheduling logic at all: no filtering, no scoring, no
// cache of node usage. It is what the API server can absorb on this machine,
// the ceiling no real scheduler can beat here.
//
//	BENCH_KUBE_TOKEN=... rawbinder --server https://127.0.0.1:6443 --ca-file ca.crt \
//	    --scheduler-name rawbinder --concurrency 32
//
// It prints "ready" once its watch is established and, on SIGTERM, one JSON
// line with what it did.
package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"net/url"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"

	"policydsl.local/bench/e2e/loadtools/apiconn"
)

type podRef struct {
	Namespace, Name string
}

type podObject struct {
	Metadata struct {
		Name      string `json:"name"`
		Namespace string `json:"namespace"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

type podList struct {
	Metadata struct {
		ResourceVersion string `json:"resourceVersion"`
	} `json:"metadata"`
	Items []podObject `json:"items"`
}

type nodeList struct {
	Items []struct {
		Metadata struct {
			Name string `json:"name"`
		} `json:"metadata"`
	} `json:"items"`
}

func main() {
	server := flag.String("server", "", "API server URL, https://host:port")
	caFile := flag.String("ca-file", "", "CA certificate of the API server")
	schedulerName := flag.String("scheduler-name", "rawbinder", "bind pods whose spec.schedulerName is this")
	concurrency := flag.Int("concurrency", 16, "Binding requests in flight at once")
	flag.Parse()
	if *server == "" || *caFile == "" || *concurrency < 1 {
		fmt.Fprintln(os.Stderr, "rawbinder: --server and --ca-file are required, --concurrency >= 1")
		os.Exit(2)
	}
	conn, err := apiconn.New(*server, *caFile)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()

	nodes, err := listNodes(ctx, conn)
	if err != nil {
		fail(err)
	}
	selector := "fieldSelector=" + url.QueryEscape("spec.schedulerName="+*schedulerName+",spec.nodeName=")
	pending := make(chan podRef, 1<<16)
	list := func() (string, error) {
		data, err := conn.Call(ctx, http.MethodGet, "/api/v1/pods?"+selector, nil, 5)
		if err != nil {
			return "", err
		}
		var pods podList
		if err := json.Unmarshal(data, &pods); err != nil {
			return "", err
		}
		for _, pod := range pods.Items {
			pending <- podRef{pod.Metadata.Namespace, pod.Metadata.Name}
		}
		return pods.Metadata.ResourceVersion, nil
	}
	rv, err := list()
	if err != nil {
		fail(err)
	}

	var bound, failed, next atomic.Int64
	var workers sync.WaitGroup
	for i := 0; i < *concurrency; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for pod := range pending {
				node := nodes[(next.Add(1)-1)%int64(len(nodes))]
				switch done, err := bind(ctx, conn, pod, node); {
				case err != nil:
					failed.Add(1)
					if ctx.Err() == nil {
						fmt.Fprintf(os.Stderr, "rawbinder: %v\n", err)
					}
				case done:
					bound.Add(1)
				}
			}
		}()
	}

	handle := func(event apiconn.Event) {
		if event.Type != "ADDED" {
			return // a bound pod leaves the selector (DELETED); others are updates of queued pods
		}
		var pod podObject
		if json.Unmarshal(event.Object, &pod) == nil && pod.Spec.NodeName == "" {
			pending <- podRef{pod.Metadata.Namespace, pod.Metadata.Name}
		}
	}
	err = conn.Watch(ctx, "/api/v1/pods?"+selector, rv, func() { fmt.Println("ready") }, handle, list)
	close(pending)
	workers.Wait()
	summary, _ := json.Marshal(map[string]int64{
		"bound": bound.Load(), "failed": failed.Load(), "requests": conn.Requests(), "nodes": int64(len(nodes)),
	})
	fmt.Println(string(summary))
	if err != nil {
		fail(err)
	}
}

func listNodes(ctx context.Context, conn *apiconn.Conn) ([]string, error) {
	data, err := conn.Call(ctx, http.MethodGet, "/api/v1/nodes", nil, 5)
	if err != nil {
		return nil, err
	}
	var nodes nodeList
	if err := json.Unmarshal(data, &nodes); err != nil {
		return nil, err
	}
	names := make([]string, 0, len(nodes.Items))
	for _, node := range nodes.Items {
		names = append(names, node.Metadata.Name)
	}
	if len(names) == 0 {
		return nil, fmt.Errorf("no nodes to bind to")
	}
	return names, nil
}

// bind posts one Binding and says whether it bound the pod. A pod that is
// gone or already bound (404, 409) is not an error: someone else dealt with it.
func bind(ctx context.Context, conn *apiconn.Conn, pod podRef, node string) (bool, error) {
	body, _ := json.Marshal(map[string]any{
		"apiVersion": "v1",
		"kind":       "Binding",
		"metadata":   map[string]string{"name": pod.Name, "namespace": pod.Namespace},
		"target":     map[string]string{"apiVersion": "v1", "kind": "Node", "name": node},
	})
	path := "/api/v1/namespaces/" + pod.Namespace + "/pods/" + pod.Name + "/binding"
	_, err := conn.Call(ctx, http.MethodPost, path, body, 5)
	if status, ok := err.(*apiconn.StatusError); ok && (status.Code == http.StatusNotFound || status.Code == http.StatusConflict) {
		return false, nil
	}
	return err == nil, err
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "rawbinder: %v\n", err)
	os.Exit(1)
}
