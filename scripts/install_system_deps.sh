#!/usr/bin/env bash
# Debian/Ubuntu packages the native build and its tests need (root or sudo). Idempotent.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
packages=(
  build-essential        # g++ for the controller and the Python extension
  nlohmann-json3-dev     # the controller's JSON library
  libgtest-dev           # C++ unit tests (GoogleTest)
  clang                  # libFuzzer builds
  libclang-rt-14-dev     # libFuzzer + sanitizer runtimes for clang 14
  python3-venv
)
missing=()
for p in "${packages[@]}"; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "installing: ${missing[*]}"
  $SUDO apt-get update -q
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi
