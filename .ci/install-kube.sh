#!/usr/bin/env bash
# Make a real etcd + kube-apiserver + kube-scheduler + kube-controller-manager,
# and Volcano's job controllers, available for the integration tests (tests/integration,
# policydsl/cli/devcluster.py).
#
#   etcd                   Debian's etcd-server package (apt-get), unless already on PATH.
#   kube-apiserver         built with the local Go toolchain from the k8s.io/kubernetes
#   kube-scheduler         Go module, at the release pinned in tools/kube/go.mod.
#   kube-controller-manager  (only its resourceclaim controller runs, in
#                          tests/integration/test_dra_side_by_side.py: it makes
#                          pods' ResourceClaims from their ResourceClaimTemplates)
#   vc-controller-manager  Volcano's job/PodGroup/Queue controllers, which
#                          tests/integration/test_vcjob.py runs: built by
#                          bench/e2e/build.sh (the one place that builds Volcano)
#                          from tools/volcano/go.mod's release.
#
# The binaries are cached outside the repo, in
#   ${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/kube/<version>/bin/
#   ${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/volcano/<version>/bin/
# and built only when missing, so this is cheap to run on every CI run.
# The first build takes about 6 minutes for Kubernetes and 10 for Volcano on
# 2 idle cores (longer when busy).
set -euo pipefail

repo_root="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
wrapper_dir="$repo_root/tools/kube"

log() { echo "install-kube: $*"; }
die() { echo "install-kube: ERROR: $*" >&2; exit 1; }

# --- etcd -------------------------------------------------------------------
if command -v etcd >/dev/null 2>&1; then
    log "etcd present: $(command -v etcd)"
else
    sudo=""
    if [ "$(id -u)" != 0 ]; then
        command -v sudo >/dev/null 2>&1 || die "etcd is missing and we are not root: install Debian's 'etcd-server' package"
        sudo="sudo"
    fi
    log "etcd missing: installing Debian package etcd-server (apt-get update + install)"
    $sudo apt-get update -qq
    # Debian's policy-rc.d (if any) keeps the package from starting its own
    # system etcd; the tests start their own on free loopback ports anyway.
    DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends etcd-server >/dev/null
    command -v etcd >/dev/null 2>&1 || die "apt-get installed etcd-server but 'etcd' is still not on PATH"
    log "installed $(etcd --version 2>/dev/null | head -n1)"
fi

# --- kube-apiserver / kube-scheduler / kube-controller-manager ----------------------------------------
# The single source of truth for the version is the wrapper go.mod.
version="$(awk '$1 == "require" && $2 == "k8s.io/kubernetes" {print $3}' "$wrapper_dir/go.mod")"
[ -n "$version" ] || die "could not read the k8s.io/kubernetes version from $wrapper_dir/go.mod"

cache_root="${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/kube/$version"
bin_dir="$cache_root/bin"
commands=(kube-apiserver kube-scheduler kube-controller-manager)

build_kube() {
    missing=()
    for cmd in "${commands[@]}"; do
        [ -x "$bin_dir/$cmd" ] || missing+=("$cmd")
    done
    if [ ${#missing[@]} -eq 0 ]; then
        log "kubernetes $version binaries present in $bin_dir"
        return
    fi

    if ! command -v go >/dev/null 2>&1; then
        if [ -x /usr/local/go/bin/go ]; then
            export PATH="/usr/local/go/bin:$PATH"
        else
            die "the Go toolchain is missing: install Go >= $(awk '$1 == "go" {print $2}' "$wrapper_dir/go.mod") (e.g. 'apt-get install golang-go' if Debian's is new enough, or the official tarball into /usr/local/go) so that 'go' is on PATH, then rerun: bash .ci/install-kube.sh"
        fi
    fi

    log "building ${missing[*]} $version with $(go version) (first time only; several minutes)"
    log "output: $bin_dir"

    # Build in a copy of the wrapper module inside the cache, so the go.sum that
    # `-mod=mod` writes and any other build litter stay out of the repo.
    src_dir="$cache_root/src"
    mkdir -p "$src_dir" "$bin_dir"
    cp "$wrapper_dir/go.mod" "$wrapper_dir/tools.go" "$src_dir/"
    [ -f "$wrapper_dir/go.sum" ] && cp "$wrapper_dir/go.sum" "$src_dir/"

    # Stamp the version into the binaries; without it they report v0.0.0-master,
    # which breaks version-based emulation/compatibility checks and /version.
    minor="${version#v1.}"; minor="${minor%%.*}"
    ldflags="-s -w"
    ldflags+=" -X k8s.io/component-base/version.gitVersion=$version"
    ldflags+=" -X k8s.io/component-base/version.gitMajor=1"
    ldflags+=" -X k8s.io/component-base/version.gitMinor=$minor"
    ldflags+=" -X k8s.io/component-base/version.gitTreeState=clean"

    start=$(date +%s)
    for cmd in "${missing[@]}"; do
        log "go build k8s.io/kubernetes/cmd/$cmd"
        (
            cd "$src_dir"
            # GOTOOLCHAIN=local: never fetch another toolchain; fail instead.
            GOTOOLCHAIN=local GOFLAGS="-mod=mod -buildvcs=false" CGO_ENABLED=0 \
                nice -n 10 go build -trimpath -ldflags "$ldflags" \
                -o "$bin_dir/$cmd.tmp" "k8s.io/kubernetes/cmd/$cmd"
        )
        # Rename only once complete, so an interrupted build is never taken as done.
        mv "$bin_dir/$cmd.tmp" "$bin_dir/$cmd"
    done
    log "built in $(( $(date +%s) - start ))s:"
    for cmd in "${commands[@]}"; do
        log "  $bin_dir/$cmd ($("$bin_dir/$cmd" --version 2>/dev/null || echo '?'))"
    done
}
build_kube

# --- vc-controller-manager ----------------------------------------------------
bash "$repo_root/bench/e2e/build.sh" vc-controller-manager
