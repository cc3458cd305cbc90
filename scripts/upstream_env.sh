#!/usr/bin/env bash
# The upstream's own environment, for the tests that run vLLM-Omni's code as the reference
# (tests/upstream/): a virtualenv with the transformers its InternVLA-A1 adapter is written for
# (4.57) and this machine's torch, and the vllm-omni 0.30.0 wheel unpacked beside it (read as
# files; never installed, never imported by the project). Idempotent; prints the source path.
set -euo pipefail
cd "$(dirname "$0")/.."
root=work/upstream
stamp="$root/ready-vllm-omni-0.30.0-transformers-4.57.6"
if [ ! -f "$stamp" ]; then
  rm -rf "$root" && mkdir -p "$root"
  python3 -m venv "$root/venv"
  "$root/venv/bin/pip" install -q --disable-pip-version-check torch==2.13.0 transformers==4.57.6 einops safetensors \
    pillow numpy 2>&1 | grep -v "is ignored: it is neither a file nor a directory" >&2 || true
  "$root/venv/bin/python" -c "import torch, transformers, einops" >/dev/null
  "$root/venv/bin/pip" download -q --no-deps --disable-pip-version-check vllm-omni==0.30.0 -d "$root/wheel" 2>&1 \
    | grep -v "is ignored" >&2 || true
  "$root/venv/bin/python" -m zipfile -e "$root"/wheel/vllm_omni-0.30.0-*.whl "$root/vllm-omni-0.30.0"
  touch "$stamp"
fi
echo "$root/vllm-omni-0.30.0"
