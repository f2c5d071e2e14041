//go:build tools

// Package tools only records which commands this module builds, so that
// go.mod and go.sum cover their dependencies; it is never compiled itself.
// bench/e2e/build.sh runs `go build volcano.sh/volcano/cmd/<command>` in a copy
// of this module: the scheduler for the benchmark, the controller-manager for
// the vcjob integration tests (.ci/install-kube.sh).
package tools

import (
	_ "volcano.sh/volcano/cmd/controller-manager"
	_ "volcano.sh/volcano/cmd/scheduler"
)
