#!/usr/bin/env bash
# Command 1 of the README: set up everything into .venv/ on a fresh machine, then run the
# main job. Safe to run again (it only installs what is missing and rebuilds what changed).
set -euo pipefail
cd "$(dirname "$0")/.."

scripts/install_system_deps.sh
scripts/install_ort_headers.sh

[ -x .venv/bin/python ] || python3 -m venv .venv
PIP=".venv/bin/pip"
$PIP install -q --upgrade pip
# The CPU build of torch first: a looser requirement alone would fetch a CUDA build.
$PIP install -q "torch==2.13.0"
$PIP install -q "scikit-build-core>=0.11" "nanobind>=2.4" "cmake>=3.22" "ninja>=1.11"
$PIP install -q --no-build-isolation -e ".[export,harness,dev]"

echo "setup: .venv ready ($(.venv/bin/omni-edge --version), $(.venv/bin/omni-edge-run --version))"
if [ "${OMNI_EDGE_SKIP_MAIN_JOB:-0}" != 1 ]; then
  # The main job on the built-in default: make the tiny Qwen3 checkpoint, export it, stream a
  # reply through the native controller.
  .venv/bin/omni-edge demo
fi
