"""token2wav on the ExecuTorch route (`--format pte|both`): the component token2wav-pte.

ExecuTorch programs take static shapes here (the controller binds them so), and token2wav's
graphs are dynamic. A whole window (28 codes in, 50 frames out) meets its caches at a few
lengths only (steady_cache_frames: the voice prompt's frames, then 50 more a window until
trimming holds them), so the encoder and the Euler step are ExecuTorch methods once per length
(token2wav.pte, XNNPACK), keyed by frames in the plan's steady groups; the voice prompt (once
per session), the utterance's last window and HiFT run token2wav-onnx's dynamic graphs on ONNX
Runtime, copied in beside the program and declared so in the plan.

Checked: held-out codes through the graph chain with the methods at every whole window against
the dynamic graphs alone (the same HiFT noise): PCM SQNR (fp32 both: summation order only), each
window's own PCM, and that every whole window ran the methods."""

from __future__ import annotations

import importlib.metadata
import json
from pathlib import Path
from typing import Any

import torch
from tqdm import tqdm

from omni_edge.artifacts import identity_report, write_validated
from omni_edge.contracts import ReportCheck
from omni_edge.export.models.minicpmo45.flow import Flow
from omni_edge.export.models.minicpmo45.token2wav_export import (
    STEADY_GROUPS,
    derived_component,
    steady_check,
    voice_cache_frames,
    whole_window_codes,
)
from omni_edge.export.models.minicpmo45.token2wav_graphs import steady_examples
from omni_edge.export.targets import executorch_target

PROGRAM = "token2wav.pte"
# Methods vs the dynamic ONNX graphs, both fp32: summation order, grown through ten Euler steps and
# HiFT (measured 63-67 dB; the static ONNX graphs 75-82 dB). Each window is held to token2wav-onnx's 40 dB.
PCM_SQNR_DB = 50.0
CHECK_WINDOWS = 5    # whole windows of the check's utterance: every cache length and then some


def export_token2wav_pte(checkpoint: Path, out: Path, flow: Flow, validate: bool) -> dict[str, Any]:
    """token2wav-pte under OUT (token2wav-onnx must be there); returns its steady plan groups."""
    cdir = derived_component(out, checkpoint, "token2wav-pte")
    meta = json.loads((cdir / "token2wav.json").read_text())
    lengths = voice_cache_frames(cdir)
    methods: dict[str, tuple[torch.nn.Module, tuple[torch.Tensor, ...]]] = {}
    for frames in lengths:
        methods.update({name.removesuffix(".onnx"): (module, example)
                        for name, (module, example, _, _) in steady_examples(flow, frames).items()})
    with tqdm(total=len(methods), desc="export minicpm-o 4.5 token2wav (pte)", unit="method", leave=False) as bar:
        facts = executorch_target.export_program(methods, cdir / PROGRAM, bar)
    groups = {group: {"backend": "executorch", "device": "cpu",
                      "graphs": {str(f): {"file": PROGRAM, "method": f"{stem}_f{f}"} for f in lengths}}
              for group, stem in STEADY_GROUPS.items()}
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32",
                    shape_bucket="steady-f" + "-".join(map(str, lengths)), target_abi="x86_64-linux")
    numerical: tuple[ReportCheck, ...] = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    task = numerical
    if validate:
        steady = {f"{name}.onnx": executorch_target.MethodSession(cdir / PROGRAM, name) for name in methods}
        sqnr, runs, agree = steady_check(cdir, steady, whole_window_codes(CHECK_WINDOWS, seed=3))
        numerical = (ReportCheck("steady_pcm_sqnr_db", sqnr, PCM_SQNR_DB, ">="),)
        task = (ReportCheck("window_agreement", agree, 1.0, ">="),
                ReportCheck("steady_graph_runs", float(runs), float(CHECK_WINDOWS * (1 + int(meta["steps"]))), ">="))
    write_validated(cdir, "token2wav-pte", identity, identity_report("numerical", identity, numerical),
                    identity_report("task", identity, task), runtime="executorch",
                    runtime_version=importlib.metadata.version("executorch"), compiler_version=f"torch-{torch.__version__}",
                    extra_metadata={"token2wav": meta, "steady": {
                        "methods": facts, "dynamic_graphs": {"runtime": "onnxruntime",
                                                             "runs": "the voice prompt, an utterance's last window, HiFT"}}})
    return groups
