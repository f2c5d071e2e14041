"""Execution, in layers that import only downward (checked by import-linter, pyproject.toml):

    service              the scheduling loop, live views, web API, dashboard, hot reload, HTTP
       |                 server, the embedded cluster: composes the two below
    simulation | kube    the simulated cluster and its reports | the Kubernetes connector
       |                 (they never import each other)
    engine               one cycle: snapshot, session, kernels, actions, plugins, rules
       |
    cluster              the cluster model: objects read from Kubernetes or snapshots, decisions

docs/architecture.md draws the house and one cycle's data flow."""
