"""The π0 graphs (vision, prefix, action expert) as ONNX Runtime graphs: their files in the
policy-onnx component (export/policy.py exports and checks them, sharing one weights file)."""

from __future__ import annotations

from typing import Any

ONNX_GRAPHS: dict[str, Any] = {"vision": "vision.onnx", "prefix": "prefix.onnx", "expert": "expert.onnx"}
