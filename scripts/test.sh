#!/usr/bin/env bash
# Command 2 of the README: every test. Lint, the C++ unit tests (plain and under
# AddressSanitizer + UndefinedBehaviorSanitizer), the JSON fuzzer for a bounded time, pytest.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$PWD/.venv/bin:$PATH"
jobs=$(nproc)
step() { printf '\n== %s\n' "$*"; }

step "rebuild the Python extension (picks up C++ changes)"
pip install -q --no-build-isolation --no-deps -e .

step "lint"
scripts/lint.sh

step "C++ unit tests"
cmake -S . -B build/native -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build/native -j"$jobs"
ctest --test-dir build/native -j"$jobs" --output-on-failure

step "C++ unit tests under ASan + UBSan"
cmake -S . -B build/asan -G Ninja -DCMAKE_BUILD_TYPE=Debug -DOMNI_EDGE_SANITIZE=address,undefined >/dev/null
cmake --build build/asan -j"$jobs"
ctest --test-dir build/asan -j"$jobs" --output-on-failure

step "fuzz the native JSON decoders"
scripts/fuzz.sh "${OMNI_EDGE_FUZZ_SECONDS:-60}"

step "pytest"
python -m pytest -q

# The tests whose references were computed elsewhere (committed fixtures) or trained in the test
# depend on the CPU's float kernels. Run them again as another CPU would: torch, MKL and oneDNN
# on their baseline instruction sets (ONNX Runtime's MLAS picks its kernels by CPUID and has no
# such switch).
step "pytest -m host_numerics with torch on its baseline CPU kernels"
ATEN_CPU_CAPABILITY=default MKL_ENABLE_INSTRUCTIONS=SSE4_2 ONEDNN_MAX_CPU_ISA=SSE41 \
  python -m pytest -q -p no:cacheprovider -m host_numerics
