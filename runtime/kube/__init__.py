"""The connector: the scheduler connected to a Kubernetes cluster (design and guarantees:
README.md here). It implements runtime.cluster.connection.ClusterConnection for the service
loop (runtime.service), and may import the engine and the cluster model, never the service or
the simulator.

| module | what |
|---|---|
| `api.py` | JSON requests and watches over the kubernetes client's authenticated pool; `connect()` |
| `convert.py` | API objects (dicts) to the model, via runtime.cluster.objects |
| `cache.py` | list+watch into a ClusterState: resume, relist on 410, reconnect; overlays of own writes |
| `binder.py` | Binding subresource, pipelined batches, retries; device cards as Binding annotations |
| `pipelining.py` | HTTP/1.1 pipelining: many requests written at once on a kept-alive connection |
| `evictor.py` | policy/v1 Eviction (PodDisruptionBudgets apply) |
| `status.py` | PodGroup status (merge patch of the object) and Queue status (/status), only on change |
| `events.py` | Events with the engine's reasons, deduplicated and rate-limited |
| `leader.py` | leader election on a Lease |
| `ratelimit.py` | token bucket: client QPS limit, Events rate |
| `cluster.py` | `KubeCluster`: all of the above as the scheduler's ClusterConnection |
| `queuesync.py`, `podconditions.py`, `volumes.py`, `settled.py`, `outages.py`, `statusfacts.py` | Queue objects kept in step with the policy; PodScheduled conditions; volume binding writes; settled pods counted; API outages; what status says |
| `metrics.py`, `volcano_metrics.py` | the scheduler's Prometheus metrics (ours and Volcano's names) |
"""
