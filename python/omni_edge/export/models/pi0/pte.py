"""`omni-edge export policy --format pte|both`: the three graphs as the methods of one ExecuTorch
program (XNNPACK delegates, portable kernels for the rest), each checked through ExecuTorch's
runtime against its module on the ONNX graphs' example inputs."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.export.policy import graph_sqnr
from omni_edge.export.targets import executorch_target


def export_pte(cdir: Path, examples: Any, bar: tqdm) -> tuple[dict[str, float], dict[str, Any]]:
    """model.pte with methods vision, prefix and expert; (SQNR per method, graph references)."""

    executorch_target.export_program({name: (module, args) for name, (module, args, _, _) in examples.items()},
                                     cdir / "model.pte", bar)
    sqnrs = graph_sqnr(examples, lambda name, feeds: executorch_target.MethodSession(cdir / "model.pte", name).run(None, feeds))
    return sqnrs, {name: {"file": "model.pte", "method": name} for name in examples}
