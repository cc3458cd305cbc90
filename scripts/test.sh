#!/usr/bin/env bash
# Command 2 of the README: every test. Lint, the C++ unit tests (plain and under
# AddressSanitizer + UndefinedBehaviorSanitizer), the JSON fuzzer for a bounded time, pytest
# (which ends with the device bundles: aarch64 under qemu-user, Windows x64 under wine64).
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
# The compiler setup.sh built the extension with, through ccache: build/native's objects are then
# the extension's (same flags), not a second compile of the controller.
export CC="${CC:-gcc}" CXX="${CXX:-g++}"
launcher=(); command -v ccache >/dev/null && launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
jobs=$(nproc)
# Nothing here reaches the Hugging Face Hub: a lookup that would wait on a network is an error.
export HF_HUB_OFFLINE=1
t0=$(date +%s)
# Which machine ran this: a failure on another host is read against its CPU first.
echo "host: $(grep -m1 'model name' /proc/cpuinfo 2>/dev/null | cut -d: -f2- | sed 's/^ //'), $(nproc) cores"
steps=()
step() { steps+=("$(( $(date +%s) - t0 ))s $*"); printf '\n== [%ss] %s\n' "$(( $(date +%s) - t0 ))" "$*"; }
# At the end, pass or fail, every step's start time again, and the bundles' build times: CI keeps
# only the tail of the output, and this is what a slow run is read from.
timeline() {
  printf '\n== timeline (total %ss)\n' "$(( $(date +%s) - t0 ))"
  printf '  %s\n' "${steps[@]}"
  grep -s "built in" build/bundles/build.log | sed 's/^/  /' || true
  sed -n '/slowest .* durations/,/ in [0-9.]*s/p' build/pytest.log 2>/dev/null | sed 's/^/  /' || true
}

rm -f build/pytest.log build/pytest-junit.xml  # the timeline shows this run's, or none
step "rebuild the Python extension (picks up C++ changes)"
if command -v ccache >/dev/null; then export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
pip install -q --no-build-isolation --no-deps -e .
unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER  # not for the cross builds below

# The device bundles (issue 17) build in the background, niced, while the steps below run: zig
# builds its C++ runtime for each Windows target on one core, and lint, the fuzzer and much of
# pytest leave the other one idle. pytest's device tests run last and wait for these builds.
step "device bundles: linux-aarch64, windows-arm64, windows-x64 (background, log: build/bundles/build.log)"
mkdir -p build/bundles
(
  for target in linux-aarch64 windows-arm64 windows-x64; do
    tests=(); [ "$target" = linux-aarch64 ] && tests=(--tests)
    start=$(date +%s)
    nice -n 10 omni-edge bundle --target "$target" --out "build/bundles/$target" "${tests[@]}"
    echo "bundle $target built in $(( $(date +%s) - start ))s"
  done
) > build/bundles/build.log 2>&1 &
bundles=$!
trap 'kill "$bundles" 2>/dev/null || true; timeline' EXIT  # a failing step ends the background builds too

step "lint"
scripts/lint.sh

step "C++ unit tests"
cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=Release -DOMNI_EDGE_BUILD_JNI=ON "${launcher[@]}" >/dev/null
cmake --build build/native -j"$jobs"
ctest --test-dir build/native -j"$jobs" --output-on-failure

step "Android app on the host: JNI bridge + dev.omniedge under JUnit and -Xcheck:jni, aapt2 link"
OMNI_EDGE_JNI_BUILD_DIR=build/native android_app/host-test.sh

step "C++ unit tests under ASan + UBSan, and the fuzzer of the native decoders (one clang build)"
# A unity build (sources compiled in batches: nlohmann::json parsed once per batch) at -O1 with
# asserts on, instrumented for libFuzzer's coverage too, so the fuzzer below links the same
# objects instead of a second compile of the controller. The Release build above stays file by
# file, for ccache's hits.
grep -qs "CMAKE_CXX_COMPILER:FILEPATH=.*clang" build/asan/CMakeCache.txt || rm -rf build/asan  # once a gcc tree
CC=clang CXX=clang++ cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo \
  -DCMAKE_CXX_FLAGS_RELWITHDEBINFO="-O1 -gline-tables-only" -DOMNI_EDGE_SANITIZE=address,undefined \
  -DCMAKE_UNITY_BUILD=ON -DOMNI_EDGE_BUILD_FUZZERS=ON >/dev/null
cmake --build build/asan -j"$jobs" --target omni_edge_tests contract_json_fuzzer omni-edge-run  # the last for tests/server/test_server_sanitized.py
ctest --test-dir build/asan -j"$jobs" --output-on-failure

step "fuzz the native JSON decoders"
OMNI_EDGE_FUZZ_BUILD=build/asan scripts/fuzz.sh "${OMNI_EDGE_FUZZ_SECONDS:-60}"

# Two workers, a test file each at a time (`--dist loadfile`: a file's module fixtures stay in one
# process; the session fixtures are made once for both, tests/session_once.py). Much of a test
# session is one Python thread (ExecuTorch's lowering, tracing, the CLIs it starts), so the
# second core is otherwise idle for long stretches.
# One compute thread per worker (torch's OpenMP and the controller's ONNX Runtime pool, in the
# workers and the CLIs they start; ExecuTorch's XNNPACK pool has no such setting): two workers of two spinning threads each on two cores ran torch's training
# 2.7x slower than two workers of one thread (41.6 s against 15.6 s for 100 steps, side by side).
step "vLLM-Omni's own environment (the InternVLA-A1 reference; scripts/upstream_env.sh)"
scripts/upstream_env.sh

step "pytest (2 workers)"
OMP_NUM_THREADS=1 MKL_NUM_THREADS=1 OMNI_EDGE_THREADS=1 python -m pytest -q -n 2 --dist loadfile --durations=15 --junitxml=build/pytest-junit.xml 2>&1 | tee build/pytest.log

step "device bundles"
wait "$bundles" || { tail -30 build/bundles/build.log; exit 1; }
grep "built in" build/bundles/build.log

# The tests whose references were computed elsewhere (committed fixtures) or trained in the test
# depend on the CPU's float kernels. Run them again as another CPU would: torch, MKL and oneDNN
# on their baseline instruction sets (ONNX Runtime's MLAS picks its kernels by CPUID and has no
# such switch). (Run beside the main pytest instead, they made the suite slower: every core is
# busy with it and the device builds until its last minutes.)
step "pytest -m host_numerics with torch on its baseline CPU kernels"
ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
  python -m pytest -q -p no:cacheprovider -m host_numerics
step "done"
