#!/usr/bin/env bash
# The cross toolchains for device bundles (omni-edge bundle) and the emulator their tests run
# under. Idempotent; root or sudo.
#  - linux-aarch64: Debian's g++-aarch64-linux-gnu (its sysroot: /usr/aarch64-linux-gnu).
#  - qemu-user 10 from bookworm-backports: bookworm's qemu 7.2 crashes while ONNX Runtime reads
#    the host's x86 /proc/cpuinfo; 10 emulates an ARM cpuinfo.
#  - windows-arm64 / windows-x64: zig, from the ziglang wheel (installed by setup.sh with the
#    dev extras); wine64 runs the windows-x64 build in the tests.
#  - android-arm64: the Android NDK, which is not a Debian package: set ANDROID_NDK.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
export DEBIAN_FRONTEND=noninteractive

missing=()
for p in g++-aarch64-linux-gnu wine64; do
  dpkg -s "$p" >/dev/null 2>&1 || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  $SUDO apt-get update -q >/dev/null
  $SUDO apt-get install -y -q --no-install-recommends "${missing[@]}"
fi

qemu_major() { dpkg-query -W -f='${Version}' qemu-user 2>/dev/null | sed -E 's/^[0-9]+://; s/\..*//'; }
if [ "$(qemu_major)" = "" ] || [ "$(qemu_major)" -lt 10 ]; then
  . /etc/os-release
  if [ "${VERSION_CODENAME:-}" = bookworm ]; then
    list=/etc/apt/sources.list.d/omni-edge-backports.list
    [ -f "$list" ] || echo "deb http://deb.debian.org/debian bookworm-backports main" | $SUDO tee "$list" >/dev/null
    $SUDO apt-get update -q >/dev/null
    $SUDO apt-get install -y -q --no-install-recommends -t bookworm-backports qemu-user
  else
    $SUDO apt-get install -y -q --no-install-recommends qemu-user
  fi
fi
echo "cross toolchains: $(aarch64-linux-gnu-g++ --version | head -1); qemu $(dpkg-query -W -f='${Version}' qemu-user);" \
     "wine $(dpkg-query -W -f='${Version}' wine64)"
