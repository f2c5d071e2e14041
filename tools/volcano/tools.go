//go:build tools

// Package tools only records which command this module builds; it is never
// compiled itself. bench/e2e/build.sh runs
// `go build volcano.sh/volcano/cmd/scheduler` in a copy of this module.
package tools

import (
	_ "volcano.sh/volcano/cmd/scheduler"
)
