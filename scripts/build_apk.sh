#!/usr/bin/env bash
# Builds the Android demo app (android_app/) with Gradle: libomniedge_jni from controller_cpp/ by
# the NDK, ONNX Runtime and the QNN libraries from Maven Central, signed with the debug key.
# Prints the APK's path. Needs ANDROID_HOME (an Android SDK with platform 36) and ANDROID_NDK
# (NDK r28), and ./gradlew or Gradle 8.13 on PATH. Install it with:
#   omni-edge push --app --device SERIAL --install "$(scripts/build_apk.sh)"
set -euo pipefail
cd "$(dirname "$0")/../android_app"
die() { echo "build_apk.sh: $*" >&2; exit 2; }
[ -n "${ANDROID_HOME:-}" ] && [ -d "${ANDROID_HOME}/platforms" ] ||
  die "set ANDROID_HOME to an Android SDK (platform 36) and ANDROID_NDK to NDK r28; see android_app/README.md"
[ -n "${ANDROID_NDK:-}" ] && [ -f "${ANDROID_NDK}/build/cmake/android.toolchain.cmake" ] ||
  die "set ANDROID_NDK to an Android NDK (r28: \$ANDROID_HOME/ndk/28.2.13676358); see android_app/README.md"
if [ -x ./gradlew ]; then gradle=./gradlew
elif command -v gradle >/dev/null; then gradle=gradle
else die "no ./gradlew and no gradle on PATH: install Gradle 8.13 and run 'gradle wrapper' here once"; fi

printf 'sdk.dir=%s\n' "$ANDROID_HOME" > local.properties
"$gradle" --no-daemon -Pomniedge.ndkPath="$ANDROID_NDK" :app:assembleDebug >&2
apk="$PWD/app/build/outputs/apk/debug/app-debug.apk"
[ -f "$apk" ] || die "Gradle finished but $apk is missing"
# AGP signs debug builds with ~/.android/debug.keystore; check the signature as the phone will.
signer=$(ls -d "$ANDROID_HOME"/build-tools/*/apksigner 2>/dev/null | sort -V | tail -1 || true)
"${signer:-apksigner}" verify --min-sdk-version 29 "$apk" >&2
unzip -l "$apk" | grep -q "lib/arm64-v8a/libomniedge_jni.so" || die "$apk has no lib/arm64-v8a/libomniedge_jni.so"
echo "$apk"
