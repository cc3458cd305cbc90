"""The source checkout this package runs from (an editable install), or OMNI_EDGE_SOURCE: the
native sources a bundle builds from, the qualification records the matrix reads."""

from __future__ import annotations

import os
from pathlib import Path


def source_tree() -> Path | None:
    """The checkout's root (it holds CMakeLists.txt and controller_cpp/), or None outside one."""
    candidates = [Path(os.environ["OMNI_EDGE_SOURCE"])] if os.environ.get("OMNI_EDGE_SOURCE") else []
    candidates += Path(__file__).resolve().parents  # python/omni_edge/source_tree.py -> the checkout
    for root in candidates:
        if (root / "CMakeLists.txt").is_file() and (root / "controller_cpp").is_dir():
            return root
    return None
