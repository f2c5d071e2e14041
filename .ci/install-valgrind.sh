#!/usr/bin/env bash
# Debian's valgrind for bench/alternate.py --instructions (callgrind counts a cycle's
# instructions; tests/test_bench_scripts.py runs it at a tenth of section 12's size).
# Installed only when missing, so this is cheap to run on every CI run.
set -euo pipefail

log() { echo "install-valgrind: $*"; }
die() { echo "install-valgrind: ERROR: $*" >&2; exit 1; }

if command -v valgrind >/dev/null 2>&1 && command -v callgrind_control >/dev/null 2>&1; then
    log "valgrind present: $(command -v valgrind)"
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "valgrind is missing and we are not root: install Debian's 'valgrind' package"
    sudo="sudo"
fi
log "installing Debian package valgrind (apt-get update + install)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends valgrind >/dev/null
command -v callgrind_control >/dev/null 2>&1 || die "apt-get installed valgrind but 'callgrind_control' is not on PATH"
log "installed $(valgrind --version)"
