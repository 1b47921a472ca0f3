#!/usr/bin/env bash
# Installs Debian's Chromium for the Playwright web-form tests (tests/test_web*.py).
# Playwright's own browser download (`playwright install`) cannot run here: the tests drive
# /usr/bin/chromium through `executable_path` instead. Idempotent; about 40 s when missing.
set -euo pipefail

if [ -x /usr/bin/chromium ]; then
    echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium present)"
    exit 0
fi
export DEBIAN_FRONTEND=noninteractive
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
$SUDO apt-get update -qq
# chromium pulls in its shared libraries; fonts so that screenshots show text.
$SUDO apt-get install -y -qq --no-install-recommends chromium fonts-dejavu-core >/dev/null
echo "install-browser: $(/usr/bin/chromium --version 2>/dev/null || echo chromium installed)"
