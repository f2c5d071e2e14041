// Load tools for the side-by-side benchmark (bench/e2e): loadgen creates the
// workload and records create→bind times from a watch; rawbinder is the
// ceiling, binding pods round-robin with no scheduling logic. Standard
// library only, so the build needs nothing from the module proxy.
module policydsl.local/bench/e2e/loadtools

go 1.24.0
