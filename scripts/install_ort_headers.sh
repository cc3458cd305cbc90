#!/usr/bin/env bash
# ONNX Runtime C headers for the native backend. The pip wheel ships only the library, so take
# the headers (API 23, ONNX Runtime 1.23) from Debian's libonnxruntime-dev in a newer suite:
# download that one .deb through a temporary sources entry, extract only its headers into
# third_party/onnxruntime/include, remove the entry again. The library itself is the wheel's,
# loaded at run time (its C API is backward compatible). A user with their own ONNX Runtime
# passes -DONNXRUNTIME_ROOT=... to CMake instead.
set -euo pipefail
cd "$(dirname "$0")/.."
dest=third_party/onnxruntime/include
if [ -f "$dest/onnxruntime_c_api.h" ]; then
  exit 0
fi
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
suite=${OMNI_EDGE_ORT_DEBIAN_SUITE:-forky}
work=$(mktemp -d)
chmod 755 "$work"  # apt downloads as the _apt user
list=/etc/apt/sources.list.d/omni-edge-ort-headers.list
cleanup() { $SUDO rm -f "$list"; rm -rf "$work"; }
trap cleanup EXIT
echo "deb [trusted=yes] http://deb.debian.org/debian $suite main" | $SUDO tee "$list" >/dev/null
apt_opts=(-o Dir::Etc::sourcelist="$list" -o Dir::Etc::sourceparts=- -o APT::Get::List-Cleanup=0)
$SUDO apt-get update -q "${apt_opts[@]}" >/dev/null
(cd "$work" && apt-get download -q "${apt_opts[@]}" libonnxruntime-dev >/dev/null)
dpkg-deb -x "$work"/libonnxruntime-dev_*.deb "$work/x"
mkdir -p "$dest"
cp -r "$work"/x/usr/include/onnxruntime/* "$dest/"
$SUDO rm -f "$list"
$SUDO apt-get update -q >/dev/null  # drop the temporary suite's package lists
grep -m1 "define ORT_API_VERSION" "$dest/onnxruntime_c_api.h"
