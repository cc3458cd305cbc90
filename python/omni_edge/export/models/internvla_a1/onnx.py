"""The InternVLA-A1 graphs (vision, frame, context, action expert) as ONNX Runtime graphs: their
files in the policy-onnx component (export/policy.py exports and checks them, sharing one
weights file)."""

from __future__ import annotations

from typing import Any

ONNX_GRAPHS: dict[str, Any] = {name: f"{name}.onnx" for name in ("vision", "frame", "context", "expert")}
