#!/usr/bin/env bash
# Static checks: ruff on everything, the layers and function lengths of controller_cpp/ and of
# python/omni_edge, mypy --strict on the omni_edge package, and the committed stub of the native
# module must match what nanobind's stubgen produces from the build.
set -euo pipefail
cd "$(dirname "$0")/.."
PY=.venv/bin/python

.venv/bin/ruff check .
python3 scripts/check_native.py  # layers of controller_cpp/ and function lengths
python3 scripts/check_python.py  # layers of python/omni_edge (and no family importing another), function lengths

# mypy reads the package where it lives: python/omni_edge is the one root (pyproject's wheel.packages).
mkdir -p build/typecheck
.venv/bin/mypy --config-file pyproject.toml --cache-dir build/typecheck/.mypy_cache python/omni_edge

$PY -m nanobind.stubgen -q -m omni_edge._native -o build/typecheck/_native.pyi
if ! diff -u python/omni_edge/_native.pyi build/typecheck/_native.pyi; then
  echo "python/omni_edge/_native.pyi is stale: regenerate it with" >&2
  echo "  $PY -m nanobind.stubgen -m omni_edge._native -o python/omni_edge/_native.pyi" >&2
  exit 1
fi
echo "lint: ruff, native and Python layers and function lengths, mypy --strict and the native stub are clean"
