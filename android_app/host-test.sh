#!/usr/bin/env bash
# The Android app, verified on this host: everything that needs neither the Android SDK/NDK nor
# a phone. Builds the JNI bridge against the JDK's jni.h and the real host controller, compiles
# the dev.omniedge layer with the host JDK, runs its JUnit 4 tests under -Xcheck:jni on the
# tiny default's artifacts, and links the app's manifest and resources with aapt2 against Debian's
# framework-res.apk. Exits non-zero on any failure.
#   OMNI_EDGE_JNI_BUILD_DIR  the CMake build tree to add the JNI target to (default build/native)
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
out=build/android-host
build=${OMNI_EDGE_JNI_BUILD_DIR:-build/native}
mkdir -p "$out"
step() { printf '\n-- android host: %s\n' "$*"; }

step "the tiny default's artifacts (omni-edge demo --model tiny), an omni plan on them, a multimodal plan"
demo=work/demo-tiny
quiet() { "$@" >"$out/prepare.log" 2>&1 || { tail -30 "$out/prepare.log"; exit 1; }; }
# Also what pytest's tiny_checkpoint and tiny_artifact copy (tests/main_job.py). The demo exports
# again only when its record is not this checkout's (python/omni_edge/cli/demo.py); the omni plan
# below is then made again on the new export.
quiet omni-edge demo --model tiny --no-speech
if [ ! -f "$out/omni/plan.json" ] || [ "$demo/artifact/omni_edge_export.json" -nt "$out/omni/plan.json" ]; then
  rm -rf "$out/talker" "$out/omni-speech" "$out/omni"
  quiet omni-edge make-checkpoint --arch qwen3-tts --preset tiny --thinker "$demo/qwen3-tiny" --out "$out/talker"
  quiet omni-edge export tts --checkpoint "$out/talker" --out "$out/omni-speech" --prefill-chunk 16 --buckets 256 \
    --validation-frames 8
  quiet omni-edge export omni --thinker-plan "$demo/artifact/plan.onnx.json" --speech-plan "$out/omni-speech/plan.json" \
    --out "$out/omni"
fi

if [ ! -f "$out/mm/plan.json" ]; then  # a multimodal plan (tiny Qwen2.5-Omni thinker) and an image and a WAV for it
  rm -rf "$out/mm-checkpoint" "$out/mm"
  quiet omni-edge make-checkpoint --arch qwen2.5-omni --preset tiny --out "$out/mm-checkpoint"
  quiet omni-edge export llm --checkpoint "$out/mm-checkpoint" --out "$out/mm" --buckets 512 --prefill-chunk 16
  quiet python -c "
import sys, wave, numpy as np
from PIL import Image
Image.new('RGB', (448, 448), (200, 30, 30)).save(sys.argv[1])
t = np.arange(40000) / 16000
with wave.open(sys.argv[2], 'wb') as w:
    w.setnchannels(1); w.setsampwidth(2); w.setframerate(16000)
    w.writeframes((0.4 * np.sin(2 * np.pi * 330 * t) * 32767).astype(np.int16).tobytes())
" "$out/mm/red.png" "$out/mm/tone.wav"
fi

if [ ! -f "$out/voice/plan.json" ]; then  # that thinker with a talker reading it: a plan that hears and speaks (+ VAD)
  rm -rf "$out/voice-talker" "$out/voice-speech" "$out/voice"
  quiet omni-edge make-checkpoint --arch qwen3-tts --preset tiny --thinker "$out/mm-checkpoint" --out "$out/voice-talker"
  quiet omni-edge export tts --checkpoint "$out/voice-talker" --out "$out/voice-speech" --prefill-chunk 16 --buckets 256 \
    --validation-frames 8
  quiet omni-edge export omni --thinker-plan "$out/mm/plan.json" --speech-plan "$out/voice-speech/plan.json" --out "$out/voice"
  quiet python -c "
import sys
from omni_edge.harness.profiling.spoken import spoken
open(sys.argv[1], 'wb').write(spoken([0.4, 'What is the capital of France?', 0.9]).pcm16())
open(sys.argv[2], 'wb').write(spoken(['Wait, stop.', 0.9]).pcm16())
" "$out/voice/question.pcm" "$out/voice/barge_in.pcm"
fi

if [ ! -f "$out/policy/plan.json" ]; then  # a π0 policy plan (tiny) and an observation for it
  rm -rf "$out/policy-checkpoint" "$out/policy"
  quiet omni-edge make-checkpoint --arch pi0 --preset tiny --out "$out/policy-checkpoint"
  quiet omni-edge export policy --checkpoint "$out/policy-checkpoint" --out "$out/policy" --max-observation-age-ms 60000
  quiet python -c "
import json, sys, numpy as np
from pathlib import Path
from PIL import Image
d = Path(sys.argv[1]); rng = np.random.default_rng(5)
for name, (w, h) in (('base_0_rgb', (320, 200)), ('left_wrist_0_rgb', (150, 260))):
    Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(d / f'{name}.png')
noise = rng.standard_normal((10, 8)).astype(np.float32)
np.save(d / 'noise.npy', noise); (d / 'noise.f32').write_bytes(noise.astype('<f4').tobytes())
json.dump({'timestamp_ms': 0, 'images': {'base_0_rgb': 'base_0_rgb.png', 'left_wrist_0_rgb': 'left_wrist_0_rgb.png'},
           'state': [0.25, -0.5, 1.0], 'prompt': 'pick up the red block'}, open(d / 'obs.json', 'w'))
" "$out/policy"
fi
step "libomniedge_jni for the host JVM ($build)"
cmake -S . -B "$build" -G Ninja -DOMNI_EDGE_BUILD_JNI=ON >/dev/null
cmake --build "$build" --target omniedge_jni omni-edge-run >/dev/null
lib=$(dirname "$(find "$build" -name libomniedge_jni.so -print -quit)")

step "dev.omniedge and its tests (javac --release 11: no Android imports)"
junit=/usr/share/java/junit4.jar:/usr/share/java/hamcrest-core.jar
rm -rf "$out/classes" && mkdir -p "$out/classes"
javac --release 11 -Xlint:all -Werror -d "$out/classes" -cp "$junit" \
  $(find android_app/omniedge/src/main/java android_app/omniedge/src/test/java -name '*.java')
if grep -rn "import android\." android_app/omniedge/src; then echo "dev.omniedge must not import android.*"; exit 1; fi

step "JUnit under -Xcheck:jni"
java -Xcheck:jni -Djava.library.path="$lib" -cp "$out/classes:$junit" \
  -Domniedge.textPlan="$PWD/$demo/artifact/plan.onnx.json" -Domniedge.omniPlan="$PWD/$out/omni/plan.json" \
  -Domniedge.cli="$PWD/$build/controller_cpp/omni-edge-run" -Domniedge.mediaPlan="$PWD/$out/mm/plan.json" \
  -Domniedge.image="$PWD/$out/mm/red.png" -Domniedge.audio="$PWD/$out/mm/tone.wav" \
  -Domniedge.policyPlan="$PWD/$out/policy/plan.json" -Domniedge.voicePlan="$PWD/$out/voice/plan.json" \
  -Domniedge.voiceQuestion="$PWD/$out/voice/question.pcm" -Domniedge.voiceBargeIn="$PWD/$out/voice/barge_in.pcm" \
  org.junit.runner.JUnitCore dev.omniedge.JsonTest dev.omniedge.OmniEdgeTest dev.omniedge.ServerTest \
  dev.omniedge.VoiceSessionTest 2>&1 | tee "$out/junit.log"
[ "${PIPESTATUS[0]}" -eq 0 ] || { echo "JUnit failed"; exit 1; }
if grep -nE "WARNING in native method|FATAL ERROR in native method|JNI local refs|^WARNING: JNI" "$out/junit.log"; then
  echo "-Xcheck:jni reported the lines above"; exit 1
fi

step "manifest and resources linked with aapt2 against framework-res.apk (API 29)"
android_app/link-resources.sh "$out/aapt2"
