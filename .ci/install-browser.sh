#!/usr/bin/env bash
# Debian's chromium and chromium-driver for the dashboard's browser test
# (tests/integration/test_dashboard_browser.py, selenium from the test extras).
# Installed only when missing, so this is cheap to run on every CI run.
set -euo pipefail

log() { echo "install-browser: $*"; }
die() { echo "install-browser: ERROR: $*" >&2; exit 1; }

if command -v chromium >/dev/null 2>&1 && command -v chromedriver >/dev/null 2>&1; then
    log "chromium and chromedriver present: $(command -v chromium), $(command -v chromedriver)"
    exit 0
fi
sudo=""
if [ "$(id -u)" != 0 ]; then
    command -v sudo >/dev/null 2>&1 || die "chromium is missing and we are not root: install Debian's 'chromium' and 'chromium-driver' packages"
    sudo="sudo"
fi
log "installing Debian packages chromium chromium-driver (apt-get update + install)"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium chromium-driver >/dev/null
command -v chromium >/dev/null 2>&1 || die "apt-get installed chromium but 'chromium' is not on PATH"
command -v chromedriver >/dev/null 2>&1 || die "apt-get installed chromium-driver but 'chromedriver' is not on PATH"
log "installed $(chromium --version 2>/dev/null | head -n1)"
