#!/usr/bin/env bash
# Helm, for tests/integration/test_packaging.py (`helm template` of deploy/helm/policydsl checked
# against deploy/'s kustomize manifests). Built from its Go module with the local toolchain (Helm
# ships no binary through a package registry), cached outside the repo in
#   ${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/helm/<version>/bin/helm
# and built only when missing (about 3 minutes the first time on 2 cores).
set -euo pipefail

version="v3.16.4"
bin_dir="${POLICYDSL_CACHE:-$HOME/.cache/policydsl}/helm/$version/bin"
log() { echo "install-helm: $*"; }
die() { echo "install-helm: ERROR: $*" >&2; exit 1; }

if [ -x "$bin_dir/helm" ]; then
    log "helm $version present in $bin_dir"
    exit 0
fi
if ! command -v go >/dev/null 2>&1; then
    [ -x /usr/local/go/bin/go ] && export PATH="/usr/local/go/bin:$PATH" || die "the Go toolchain is missing"
fi
log "building helm $version with $(go version) (first time only)"
mkdir -p "$bin_dir"
GOTOOLCHAIN=local GOFLAGS="-mod=mod" GOBIN="$bin_dir.tmp" nice -n 10 go install "helm.sh/helm/v3/cmd/helm@$version"
mv "$bin_dir.tmp/helm" "$bin_dir/helm" && rmdir "$bin_dir.tmp"
log "built $("$bin_dir/helm" version --short 2>/dev/null || echo "$bin_dir/helm")"
