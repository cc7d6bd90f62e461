#!/usr/bin/env bash
# Installs every Debian package lockstep needs to build, test and benchmark (idempotent).
set -euo pipefail
pkgs=(build-essential cmake ninja-build git clang clang-format libclang-rt-14-dev
      nlohmann-json3-dev libfmt-dev libcli11-dev libgtest-dev libgmock-dev libbenchmark-dev
      libxxhash-dev libcpp-httplib-dev libssl-dev python3
      chromium)  # headless, for the serve chat page test (tests/js/web_page_test.js)
missing=()
for p in "${pkgs[@]}"; do dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p"); done
# Node.js and npm (the tokenizer and chat-template references): machines that already carry a
# Node.js with its own npm must not get Debian's npm, which conflicts with it.
command -v node >/dev/null 2>&1 || missing+=(nodejs)
command -v npm >/dev/null 2>&1 || missing+=(npm)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""; [ "$(id -u)" -ne 0 ] && SUDO=sudo
  export DEBIAN_FRONTEND=noninteractive
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
