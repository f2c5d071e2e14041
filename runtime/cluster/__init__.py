"""The cluster model: what the scheduler knows of a cluster, read from Kubernetes objects or
snapshot files, and what a cycle decides about it.

Owns: `model` (ClusterState: nodes, pods, PodGroups, Queues, PriorityClasses, and how decisions
come true), `selectors`, `storage` (PVs, claims, classes, CSINodes), the readers of Kubernetes
objects (`objects`, `podspec`, `storagespec`, `kubefields`), `decisions` (bindings, evictions,
PodGroup status, reasons) and `connection` (what the service loop asks of a cluster).
May import: compiler and the language (for the catalog's names and quantities); nothing else
of runtime."""
