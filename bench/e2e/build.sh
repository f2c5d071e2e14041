#!/usr/bin/env bash
# Build the Go programs the side-by-side benchmark (python -m bench.e2e) and the
# vcjob integration tests run besides the dev cluster's own kube-apiserver and
# kube-scheduler:
#
#   vc-scheduler           Volcano's scheduler and job controllers, from the
#   vc-controller-manager  volcano.sh/volcano Go module at the release pinned in
#                          tools/volcano/go.mod (a wrapper module of its own: its
#                          k8s.io/* pins differ from tools/kube's). The benchmark
#                          runs vc-scheduler; tests/integration/test_vcjob.py runs
#                          the controller-manager (.ci/install-kube.sh builds it).
#   loadtools              bench/e2e/loadtools (standard library only, seconds to
#                          build): loadgen creates the workload and times binds
#                          from a watch; rawbinder binds pending pods round-robin
#                          with no scheduling logic, the ceiling of the machine.
#
# Outputs are cached outside the repo and built only when missing:
#   ${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/volcano/<version>/bin/{vc-scheduler,vc-controller-manager}
#   ${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/loadtools/<source hash>/bin/{loadgen,rawbinder}
# The first build of each Volcano command takes roughly 10 minutes on 2 idle
# cores (the second less: they share most packages in Go's build cache).
#
#   bash bench/e2e/build.sh [all|vc-scheduler|vc-controller-manager|loadtools]
#   (default: all, what the benchmark needs: vc-scheduler and loadtools)
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)"
volcano_wrapper="$repo_root/tools/volcano"
loadtools_src="$repo_root/bench/e2e/loadtools"
cache="${POLICYDSL_CACHE:-$HOME/.cache/policydsl}"
what="${1:-all}"

log() { echo "bench-build: $*"; }
die() { echo "bench-build: ERROR: $*" >&2; exit 1; }

case "$what" in
    all|vc-scheduler|vc-controller-manager|loadtools) ;;
    *) die "unknown target '$what' (expected all, vc-scheduler, vc-controller-manager or loadtools)" ;;
esac

# Only what is missing needs Go: a machine with everything cached runs this without it.
need_go() {
    command -v go >/dev/null 2>&1 && return
    if [ -x /usr/local/go/bin/go ]; then
        export PATH="/usr/local/go/bin:$PATH"
    else
        die "the Go toolchain is missing: install Go >= $(awk '$1 == "go" {print $2}' "$volcano_wrapper/go.mod") so that 'go' is on PATH, then rerun: bash bench/e2e/build.sh"
    fi
}

# GOTOOLCHAIN=local: never fetch another toolchain; fail instead.
go_build() {
    GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 nice -n 10 go build -trimpath "$@"
}

# build_volcano NAME PACKAGE: the command PACKAGE of the pinned volcano.sh/volcano
# release, as $cache/volcano/<version>/bin/NAME.
build_volcano() {
    local name="$1" package="$2" version bin_dir src_dir start
    version="$(awk '$1 == "require" && $2 == "volcano.sh/volcano" {print $3}' "$volcano_wrapper/go.mod")"
    [ -n "$version" ] || die "no 'require volcano.sh/volcano vX.Y.Z' line in $volcano_wrapper/go.mod"
    bin_dir="$cache/volcano/$version/bin"
    if [ -x "$bin_dir/$name" ]; then
        log "$name $version present: $bin_dir/$name"
        return
    fi
    need_go
    log "building $name $version with $(go version) (first time only; about 10 minutes)"
    # Build in a copy of the wrapper module, so build litter stays out of the repo.
    src_dir="$cache/volcano/$version/src"
    mkdir -p "$src_dir" "$bin_dir"
    cp "$volcano_wrapper/go.mod" "$volcano_wrapper/go.sum" "$volcano_wrapper/tools.go" "$src_dir/"
    start=$(date +%s)
    (
        cd "$src_dir"
        go_build -ldflags "-s -w -X volcano.sh/volcano/pkg/version.Version=$version" \
            -o "$bin_dir/$name.tmp" "$package"
    )
    # Rename only once complete, so an interrupted build is never taken as done.
    mv "$bin_dir/$name.tmp" "$bin_dir/$name"
    log "built $bin_dir/$name in $(( $(date +%s) - start ))s"
}

build_loadtools() {
    local digest bin_dir cmd
    # Keyed by the source's content (the Python side hashes the same files, in
    # the same order: bench/e2e/binaries.py), so an edited tool is rebuilt.
    digest="$(cd "$loadtools_src" && cat go.mod $(find . -name '*.go' | LC_ALL=C sort) | sha256sum | cut -c1-16)"
    bin_dir="$cache/loadtools/$digest/bin"
    if [ -x "$bin_dir/loadgen" ] && [ -x "$bin_dir/rawbinder" ]; then
        log "loadgen and rawbinder present in $bin_dir"
        return
    fi
    need_go
    log "building loadgen and rawbinder into $bin_dir"
    mkdir -p "$bin_dir"
    for cmd in loadgen rawbinder; do
        (cd "$loadtools_src" && go_build -ldflags "-s -w" -o "$bin_dir/$cmd.tmp" "./cmd/$cmd")
        mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
    done
}

if [ "$what" = all ] || [ "$what" = loadtools ]; then build_loadtools; fi
if [ "$what" = all ] || [ "$what" = vc-scheduler ]; then build_volcano vc-scheduler volcano.sh/volcano/cmd/scheduler; fi
if [ "$what" = vc-controller-manager ]; then build_volcano vc-controller-manager volcano.sh/volcano/cmd/controller-manager; fi
