"""The engine: one scheduling cycle over a snapshot of the cluster.

Owns: `snapshot` (struct-of-arrays), `session` (the cycle's state and the combinators of the
plugins' answers) with its vocabulary `extension`, `kernels`, `actions`, `plugins`, the stateful
`rules` and the static `nodemasks` they share, `cycle` (run_cycle, collect), `queueshare`,
`explanation` (why a pod or gang waits), `fragmentation`, `evictions` (the eviction audit).
May import: runtime.cluster, compiler and the language; never simulation, kube or service."""
