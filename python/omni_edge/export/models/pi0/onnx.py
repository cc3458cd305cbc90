"""The π0 graphs (vision, prefix, action expert) as ONNX Runtime graphs sharing one weights file,
each checked against its module."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.export.models.pi0.graphs import Examples
from omni_edge.export.policy import graph_sqnr
from omni_edge.export.targets import onnx_target


def export_onnx(cdir: Path, examples: Examples, bar: tqdm) -> dict[str, float]:
    """The three ONNX graphs sharing one weights file, each checked against its module."""
    for name, (module, args, inputs, outputs) in examples.items():
        bar.set_postfix_str(name)
        onnx_target.export_graph(module, args, inputs, outputs, cdir / f"{name}.onnx")
        bar.update()
    sqnrs = graph_sqnr(examples, lambda name, feeds: onnx_target.cpu_session(cdir / f"{name}.onnx").run(None, feeds))
    onnx_target.share_weights(cdir, [f"{name}.onnx" for name in examples])
    return sqnrs


ONNX_GRAPHS: dict[str, Any] = {"vision": "vision.onnx", "prefix": "prefix.onnx", "expert": "expert.onnx"}
