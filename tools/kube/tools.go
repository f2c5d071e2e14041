//go:build tools

// Package tools only records which commands this module builds; it is never
// compiled itself. .ci/install-kube.sh runs
// `go build k8s.io/kubernetes/cmd/<name>` in a copy of this module.
package tools

import (
	_ "k8s.io/kubernetes/cmd/kube-apiserver"
	_ "k8s.io/kubernetes/cmd/kube-controller-manager"
	_ "k8s.io/kubernetes/cmd/kube-scheduler"
)
