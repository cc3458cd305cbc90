#!/usr/bin/env bash
# Links the app's manifest and resources with aapt2 against Debian's framework-res.apk (the
# Android 10 / API 29 framework, the app's minSdk), as the Android build's resource step would:
# a malformed manifest, an unknown attribute or a missing resource fails here. Then checks that
# a deliberately broken manifest does fail. (Compiling MainActivity needs android.jar, which no
# registry reachable here provides: build_apk.sh does that on a machine with the Android SDK.)
#   link-resources.sh OUT_DIR
set -euo pipefail
cd "$(dirname "$0")"
out=${1:?usage: link-resources.sh OUT_DIR}
framework=/usr/share/android-framework-res/framework-res.apk
for tool in aapt2 "$framework"; do
  command -v "$tool" >/dev/null || [ -f "$tool" ] || { echo "link-resources.sh: $tool missing (apt-get install aapt android-framework-res)"; exit 2; }
done
rm -rf "$out" && mkdir -p "$out"
aapt2 compile --dir app/src/main/res -o "$out/res.zip"

# MANIFEST OUT.ap_. The package attribute is the Gradle namespace, added as AGP's manifest merger
# does. <uses-native-library> (API 31) is newer than Debian's aapt2 (Android 10): dropped here only.
link() {
  sed -e 's|<manifest xmlns:android="http://schemas.android.com/apk/res/android"|& package="dev.omniedge.app"|' \
      -e '/<uses-native-library/d' "$1" > "$out/AndroidManifest.xml"
  aapt2 link -I "$framework" --manifest "$out/AndroidManifest.xml" --min-sdk-version 29 --target-sdk-version 36 \
    --version-code 1 --version-name 0.3.0 --java "$out/gen" -o "$2" "$out/res.zip"
}
link app/src/main/AndroidManifest.xml "$out/app.ap_"
[ "$(aapt2 dump packagename "$out/app.ap_")" = dev.omniedge.app ] || { echo "link-resources.sh: the linked package is not dev.omniedge.app"; exit 1; }
echo "linked: $out/app.ap_ ($(unzip -l "$out/app.ap_" | tail -1 | awk '{print $2}') entries), R.java in $out/gen"

# The negative control: an attribute the framework does not have must fail the link.
sed 's|android:exported="true"|android:exportd="true"|' app/src/main/AndroidManifest.xml > "$out/broken.xml"
if link "$out/broken.xml" "$out/broken.ap_" 2>"$out/broken.log"; then
  echo "link-resources.sh: a manifest with an unknown attribute linked: the check is not working"; exit 1
fi
echo "a broken manifest is refused: $(grep -m1 -o 'error.*' "$out/broken.log")"
