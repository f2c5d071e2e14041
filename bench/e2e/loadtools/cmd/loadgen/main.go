// loadgen drives the benchmark's workload against the API server.
//
//	loadgen create --server URL --ca-file CA --concurrency 16 --jobs FILE
//	    Each line of FILE is one job: a JSON array of requests
//	    {"method": "POST", "path": "/api/v1/namespaces/ns/pods", "body": {...}}
//	    sent in order (a PodGroup before its pods, as Volcano's controller
//	    does); jobs run `concurrency` at a time, in file order. Prints one JSON
//	    line: requests sent, objects created, first send and last completion
//	    times (Unix ns).
//
//	loadgen watch --server URL --ca-file CA --namespace NS --expect N --out FILE --timeout 10m
//	    Watches the namespace's pods, prints "ready" once the watch is
//	    established, and records for every pod the local time its ADDED event
//	    arrived and the local time the event showing spec.nodeName arrived.
//	    Stops when N pods are bound, at the timeout or on SIGTERM, then writes
//	    FILE (TSV: name, added ns, bound ns or 0, node) and prints a JSON line.
//
// The bearer token comes from $BENCH_KUBE_TOKEN.
package main

import (
	"bufio"
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"net/http"
	"os"
	"os/signal"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"policydsl.local/bench/e2e/loadtools/apiconn"
)

func main() {
	if len(os.Args) < 2 || (os.Args[1] != "create" && os.Args[1] != "watch") {
		fmt.Fprintln(os.Stderr, "usage: loadgen create|watch [flags] (see the source's header)")
		os.Exit(2)
	}
	flags := flag.NewFlagSet("loadgen "+os.Args[1], flag.ExitOnError)
	server := flags.String("server", "", "API server URL, https://host:port")
	caFile := flags.String("ca-file", "", "CA certificate of the API server")
	concurrency := flags.Int("concurrency", 16, "create: jobs in flight at once")
	jobsFile := flags.String("jobs", "", "create: JSON-lines file of jobs")
	namespace := flags.String("namespace", "", "watch: namespace of the pods")
	expect := flags.Int("expect", 0, "watch: stop once this many pods are bound")
	out := flags.String("out", "", "watch: TSV file to write")
	timeout := flags.Duration("timeout", 10*time.Minute, "watch: give up after this long")
	_ = flags.Parse(os.Args[2:])
	if *server == "" || *caFile == "" {
		fail(fmt.Errorf("--server and --ca-file are required"))
	}
	conn, err := apiconn.New(*server, *caFile)
	if err != nil {
		fail(err)
	}
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, syscall.SIGINT)
	defer stop()
	var summary any
	if os.Args[1] == "create" {
		if *jobsFile == "" || *concurrency < 1 {
			fail(fmt.Errorf("create needs --jobs and --concurrency >= 1"))
		}
		summary, err = create(ctx, conn, *jobsFile, *concurrency)
	} else {
		if *namespace == "" || *out == "" || *expect < 0 {
			fail(fmt.Errorf("watch needs --namespace, --out and --expect >= 0"))
		}
		summary, err = watch(ctx, conn, *namespace, *expect, *out, *timeout)
	}
	if err != nil {
		fail(err)
	}
	line, _ := json.Marshal(summary)
	fmt.Println(string(line))
}

// ------------------------------------------------------------------ create

type request struct {
	Method string          `json:"method"`
	Path   string          `json:"path"`
	Body   json.RawMessage `json:"body"`
}

type createSummary struct {
	Requests    int64    `json:"requests"`
	Created     int64    `json:"created"`
	Failed      int64    `json:"failed"`
	FirstSentNs int64    `json:"first_sent_ns"`
	LastDoneNs  int64    `json:"last_done_ns"`
	Errors      []string `json:"errors"`
}

func create(ctx context.Context, conn *apiconn.Conn, jobsFile string, concurrency int) (*createSummary, error) {
	file, err := os.Open(jobsFile)
	if err != nil {
		return nil, err
	}
	defer file.Close()
	var jobs [][]request
	scanner := bufio.NewScanner(file)
	scanner.Buffer(make([]byte, 1<<20), 64<<20)
	for line := 1; scanner.Scan(); line++ {
		var job []request
		if err := json.Unmarshal(scanner.Bytes(), &job); err != nil {
			return nil, fmt.Errorf("%s:%d: %w", jobsFile, line, err)
		}
		jobs = append(jobs, job)
	}
	if err := scanner.Err(); err != nil {
		return nil, err
	}

	summary := &createSummary{Errors: []string{}}
	var created, failed, firstSent, lastDone atomic.Int64
	var errorsMu sync.Mutex
	queue := make(chan []request)
	var workers sync.WaitGroup
	for i := 0; i < concurrency; i++ {
		workers.Add(1)
		go func() {
			defer workers.Done()
			for job := range queue {
				for _, step := range job {
					firstSent.CompareAndSwap(0, time.Now().UnixNano())
					_, err := conn.Call(ctx, step.Method, step.Path, step.Body, 6)
					if status, ok := err.(*apiconn.StatusError); ok && status.Code == http.StatusConflict {
						err = nil // created by an earlier attempt whose answer was lost
					}
					if err != nil {
						failed.Add(1)
						errorsMu.Lock()
						if len(summary.Errors) < 5 {
							summary.Errors = append(summary.Errors, err.Error())
						}
						errorsMu.Unlock()
						break // the rest of a job needs its first objects
					}
					created.Add(1)
					if done := time.Now().UnixNano(); done > lastDone.Load() {
						lastDone.Store(done) // racy max, but good to well under a millisecond
					}
				}
			}
		}()
	}
	for _, job := range jobs {
		if ctx.Err() != nil {
			break
		}
		queue <- job
	}
	close(queue)
	workers.Wait()
	summary.Requests, summary.Created, summary.Failed = conn.Requests(), created.Load(), failed.Load()
	summary.FirstSentNs, summary.LastDoneNs = firstSent.Load(), lastDone.Load()
	return summary, nil
}

// ------------------------------------------------------------------ watch

type podTimes struct {
	addedNs, boundNs int64
	node             string
}

type watchSummary struct {
	Seen  int `json:"seen"`
	Bound int `json:"bound"`
	// The watch request itself and every request after it: what the harness
	// subtracts from the API server's count over the run (the initial list
	// comes before "ready", so before the harness's first reading).
	RequestsSinceReady int64 `json:"requests_since_ready"`
	TimedOut           bool  `json:"timed_out"`
}

type watchedPod struct {
	Metadata struct {
		Name string `json:"name"`
	} `json:"metadata"`
	Spec struct {
		NodeName string `json:"nodeName"`
	} `json:"spec"`
}

func watch(ctx context.Context, conn *apiconn.Conn, namespace string, expect int, out string, timeout time.Duration) (*watchSummary, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	pods := map[string]*podTimes{}
	bound := 0
	handle := func(event apiconn.Event) {
		now := time.Now().UnixNano()
		var pod watchedPod
		if event.Type == "DELETED" || json.Unmarshal(event.Object, &pod) != nil {
			return
		}
		times, known := pods[pod.Metadata.Name]
		if !known {
			times = &podTimes{addedNs: now}
			pods[pod.Metadata.Name] = times
		}
		if pod.Spec.NodeName != "" && times.boundNs == 0 {
			times.boundNs, times.node = now, pod.Spec.NodeName
			bound++
			if expect > 0 && bound >= expect {
				cancel()
			}
		}
	}
	// The namespace is fresh, so the first list is empty. After a 410 the
	// list stands in for the events missed, timed as of the list.
	path := "/api/v1/namespaces/" + namespace + "/pods"
	list := func() (string, error) {
		data, err := conn.Call(ctx, http.MethodGet, path, nil, 5)
		if err != nil {
			return "", err
		}
		var pods struct {
			Metadata struct {
				ResourceVersion string `json:"resourceVersion"`
			} `json:"metadata"`
			Items []json.RawMessage `json:"items"`
		}
		if err := json.Unmarshal(data, &pods); err != nil {
			return "", err
		}
		for _, item := range pods.Items {
			handle(apiconn.Event{Type: "ADDED", Object: item})
		}
		return pods.Metadata.ResourceVersion, nil
	}
	rv, err := list()
	if err != nil {
		return nil, err
	}
	var atReady int64
	ready := func() {
		atReady = conn.Requests()
		fmt.Println("ready")
	}
	err = conn.Watch(ctx, path, rv, ready, handle, list)
	timedOut := ctx.Err() == context.DeadlineExceeded
	if err != nil {
		return nil, err
	}
	file, err := os.Create(out)
	if err != nil {
		return nil, err
	}
	writer := bufio.NewWriter(file)
	for name, times := range pods {
		fmt.Fprintf(writer, "%s\t%d\t%d\t%s\n", name, times.addedNs, times.boundNs, times.node)
	}
	if err := writer.Flush(); err != nil {
		return nil, err
	}
	if err := file.Close(); err != nil {
		return nil, err
	}
	return &watchSummary{Seen: len(pods), Bound: bound, RequestsSinceReady: conn.Requests() - atReady + 1, TimedOut: timedOut}, nil
}

func fail(err error) {
	fmt.Fprintf(os.Stderr, "loadgen: %v\n", err)
	os.Exit(1)
}
