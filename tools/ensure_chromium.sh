#!/usr/bin/env bash
# The real-browser tests drive Debian's Chromium with Playwright (never a downloaded browser).
set -euo pipefail
if command -v chromium >/dev/null 2>&1; then exit 0; fi
echo "installing Debian's chromium for the browser tests..."
SUDO=""
if [ "$(id -u)" -ne 0 ]; then SUDO="sudo"; fi
export DEBIAN_FRONTEND=noninteractive
$SUDO apt-get update -q >/dev/null
$SUDO apt-get install -y -q chromium >/dev/null
command -v chromium >/dev/null
