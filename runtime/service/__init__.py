"""The service: the running scheduler around the engine.

Owns: `loop` (the scheduling loop over a ClusterConnection), `embedded` (a ClusterState in memory
as that connection), `views` (what the last cycle saw: queues, pending jobs, explain), `webapi`
and `dashboard` (the read-only views over HTTP), `server` (the HTTP endpoint with /metrics and
health), `reload` (hot reload of the policy), `logformat`.
May import: everything of runtime (it composes kube and simulation), compiler, the language."""
