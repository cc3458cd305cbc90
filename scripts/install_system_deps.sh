#!/usr/bin/env bash
# Debian/Ubuntu packages the native build and its tests need (root or sudo). Idempotent.
set -euo pipefail
SUDO=""
[ "$(id -u)" = 0 ] || SUDO="sudo"
packages=(
  build-essential        # g++ for the controller and the Python extension
  ccache                 # the C++ tests reuse the extension build's objects
  nlohmann-json3-dev     # the controller's JSON library
  libkissfft-dev         # the audio front end's FFT (header-only kissfft.hh)
  libstb-dev             # image decoding (header-only stb_image.h)
  libgtest-dev           # C++ unit tests (GoogleTest)
  libboost-dev           # omni-edge-run serve: Boost.Beast and Asio (header-only)
  libmsgpack-cxx-dev     # the OpenPI policy websocket: msgpack (header-only, used without Boost)
  clang                  # libFuzzer builds
  libclang-rt-14-dev     # libFuzzer + sanitizer runtimes for clang 14
  python3-venv
  openjdk-17-jdk-headless  # the Android app's Java layer and its JNI bridge, tested on the host JVM
  junit4                 # its JUnit tests (android_app/host-test.sh)
  aapt                   # aapt2: links the app's manifest and resources
  android-framework-res  # framework-res.apk (API 29) to link them against
  apksigner zipalign     # the APK's signature and alignment (scripts/build_apk.sh, with the SDK's)
  espeak-ng              # synthetic speech with known boundaries: voice activity and realtime voice tests
  chromium               # the voice page's test: headless, a fake microphone from a file
  pocketsphinx-testdata  # real recorded speech with transcripts (16 kHz LibriVox clips): the audio front end's tests
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
