"""`omni-edge export llm` on a MiniCPM-o 4.5 checkpoint (the fixture written through vLLM-Omni's
own thinker): the thinker's decoder validated as any text LLM, one vision graph per slice size
of the asked image sizes and the audio piece graph, each held to the reference modules, and
real media (the photo sliced into a grid, recorded speech past 30 s) through the exported graphs
and the native engine greedy-equal to the PyTorch reference (rule 3)."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest
import torch
from minicpmo45_media import audio_inputs, image_inputs
from omni_edge.export.models.minicpmo45.reference import Media, Thinker, generate, load_thinker
from omni_edge.export.models.minicpmo45.validation import exported_generate, greedy_agreement
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.registry import export_checkpoint
from paths import DATA

CHECKPOINT = DATA / "minicpmo45" / "checkpoint"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], Thinker]:
    out = tmp_path_factory.mktemp("minicpmo45") / "art"
    opts = LlmExportOptions(buckets=(512,), prefill_chunk=32, threads=1, image_sizes=((448, 448), (512, 600)))
    plans = export_checkpoint(CHECKPOINT, out, opts)
    return out, plans, load_thinker(CHECKPOINT)


def _checks(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text())
    return {c["name"]: c["observed"] for c in report["checks"]}


def test_the_export_writes_validated_components_and_a_text_plan(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, _ = exported
    assert plans[0] == out / "plan.onnx.json" and (out / "plan.json").is_file()
    for component in ("thinker-onnx", "vision-onnx", "audio-onnx"):
        manifest = json.loads((out / component / "manifest.json").read_text())["metadata"]["artifact"]
        assert manifest["numerical_validation"]["passed"] and manifest["task_validation"]["passed"], component
    vision = json.loads((out / "vision-onnx" / "manifest.json").read_text())["metadata"]["vision"]
    assert vision["slice_sizes"] == [[24, 42], [32, 32], [35, 30]]  # the red square's one; the photo's three
    assert _checks(out / "vision-onnx" / "reports" / "numerical.json")["embeds_sqnr_db"] > 100  # measured 129
    assert _checks(out / "audio-onnx" / "reports" / "numerical.json")["embeds_sqnr_db"] > 100   # measured 131
    assert _checks(out / "audio-onnx" / "reports" / "task.json")["media_greedy_agreement"] == 1.0


def test_real_media_through_the_exported_graphs_match_the_reference(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, thinker = exported
    media = [Media("image", image_inputs()[1][1]), Media("audio", audio_inputs()[2][1])]  # photo; speech, 33 s
    with torch.no_grad():
        ids, ref = generate(thinker, media, "Describe both.", 12, ignore_stop=True)
    assert ids.count(thinker.token("<unk>")) == 3 * thinker.config.slices.query_num + 330
    got = exported_generate(thinker, plans[0], out, ids, media, 12, threads=1)
    assert greedy_agreement(got, ref) == 1.0, (got, ref.ids)


def test_an_image_whose_slices_have_no_graph_is_refused_by_size(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, thinker = exported
    media = [Media("image", image_inputs()[2][1])]  # 1000x400: slices the export was not asked for
    with torch.no_grad():
        ids, _ = generate(thinker, media, "Describe it.", 1)
    with pytest.raises(ValueError, match=r"no vision graph for a 20x50 slice"):
        exported_generate(thinker, plans[0], out, ids, media, 1)
