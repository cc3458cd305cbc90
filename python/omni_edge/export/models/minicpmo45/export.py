"""`omni-edge export llm` on a MiniCPM-o 4.5 checkpoint: the thinker's Qwen3 decoder through the
shared text decoder export (every target and precision it has: ONNX Runtime fp32/int8/int4,
ExecuTorch, QNN HTP per SoC; plan.json is its text plan), and on the CPU the encoders as ONNX
components beside it:

    vision-onnx/  one graph per slice size of the --image-sizes images (slice_<rows>x<cols>.onnx)
    audio-onnx/   a piece graph per bucket of mel frames (audio_piece_1000.onnx: 10 s; _3000: 30 s)

Each encoder's numerical report holds its graphs against the reference modules; their task
report (shared) runs a whole image + audio request through the exported graphs (encoders on
ONNX Runtime, their rows in place of the prompt's `<unk>`s, the thinker on the native engine),
greedy, against the PyTorch reference.

Plans: plan.onnx.json (= plan.json) is the whole thinker: the encoders as entry stages run by
the controller (which slices images and cuts audio as the reference processors do), their rows
in place of the prompt's `<unk>`s; plan.thinker-onnx.json the thinker alone (text -> text).
The talker (talker-onnx, talker_export.py) is exported beside them with a plan for the decoder
engine (plan.talker-onnx.json). Not yet: the talker as a stage of the omni plan, token2wav."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, write_validated
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.decoder.export import checked, export_decoder_lm
from omni_edge.export.models.minicpmo45.audio import audio_tokens
from omni_edge.export.models.minicpmo45.onnx import PIECE_BUCKETS, export_audio, export_vision
from omni_edge.export.models.minicpmo45.plan import media_plan, omni_plan, rewrite_thinker_plan
from omni_edge.export.models.minicpmo45.reference import Thinker, load_thinker
from omni_edge.export.models.minicpmo45.token2wav_files import DIRECTORY
from omni_edge.export.models.minicpmo45.validation import MEDIA_TOKENS, media_report
from omni_edge.export.models.minicpmo45.vision import slice_image
from omni_edge.export.options import LlmExportOptions

ENCODER_SQNR_DB = 60.0  # fp32 graphs vs the reference modules: summation order only (measured 120+ dB)
PREPROCESSOR = ("tokenizer.json", "config.json", "preprocessor_config.json")


def slice_sizes(thinker: Thinker, image_sizes: tuple[tuple[int, int], ...]) -> list[tuple[int, int]]:
    """The (rows, cols) patch sizes of every slice of images of these (width, height) sizes."""
    from PIL import Image

    sizes: set[tuple[int, int]] = set()
    patch = thinker.config.vision.patch
    for width, height in image_sizes:
        sliced = slice_image(Image.new("RGB", (width, height)), thinker.config.slices)
        sizes |= {(h // patch, w // patch) for h, w in sliced.sizes}
    return sorted(sizes)


def export(checkpoint: Path, out: Path, opts: LlmExportOptions) -> list[Path]:
    opts = checked(opts)
    thinker = load_thinker(checkpoint)
    plans = export_decoder_lm(thinker.llm, checkpoint, out, opts)
    for plan in {*plans, out / "plan.json"}:
        rewrite_thinker_plan(plan)
    if opts.target == "cpu" and "onnx" in opts.formats:
        # The text plan keeps its own name; plan.onnx.json (and plan.json) become the whole thinker's.
        text = out / "plan.thinker-onnx.json"
        shutil.copy2(out / "plan.onnx.json", text)
        vision, audio = _encoders(checkpoint, out, thinker, text, opts)
        whole = media_plan(out / "plan.onnx.json", checkpoint.name, thinker, text, vision, audio)
        shutil.copy2(whole, out / "plan.json")
        talker_plan = _talker(checkpoint, out, thinker, opts)
        plans = [whole, text, *[p for p in plans if p.name != "plan.onnx.json"], talker_plan]
        if (checkpoint / DIRECTORY).is_dir():  # token2wav's files: the whole omni pipeline
            plans.append(_omni(checkpoint, out, thinker, whole, talker_plan, opts))
    return plans


def _omni(checkpoint: Path, out: Path, thinker: Thinker, whole: Path, talker_plan: Path, opts: LlmExportOptions) -> Path:
    """token2wav-onnx (its voice from opts.voice) and the three-stage plan plan.omni-onnx.json."""
    from omni_edge.export.models.minicpmo45.reference import load_talker
    from omni_edge.export.models.minicpmo45.token2wav_export import export_token2wav, token2wav_stage
    from omni_edge.export.models.minicpmo45.token2wav_files import load_token2wav

    cdir = export_token2wav(checkpoint, out, load_token2wav(checkpoint), opts.voice, opts.validate)
    meta = json.loads((cdir / "token2wav.json").read_text())
    return omni_plan(out / "plan.omni-onnx.json", checkpoint.name, whole, talker_plan, load_talker(checkpoint),
                     thinker.config.hidden, token2wav_stage("token2wav-onnx", meta, 0, 0))


def _talker(checkpoint: Path, out: Path, thinker: Thinker, opts: LlmExportOptions) -> Path:
    """talker-onnx, checked on the thinker reference's spoken reply to the roadmap's request."""
    import torch

    from omni_edge.export.models.minicpmo45.reference import generate, load_talker
    from omni_edge.export.models.minicpmo45.talker_export import export_talker
    from omni_edge.export.models.minicpmo45.validation import QUESTION, request

    span = None
    if opts.validate:
        with torch.no_grad():
            _, reply = generate(thinker, request(opts.image_sizes[0]), QUESTION, MEDIA_TOKENS, speech=True, ignore_stop=True)
        assert reply.prenorm is not None
        span = (reply.ids, reply.hidden, reply.prenorm)
    return export_talker(checkpoint, out, load_talker(checkpoint), thinker.llm.model.norm, opts, span)


def _identity(checkpoint: Path, bucket: str) -> dict[str, str]:
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    return dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32", shape_bucket=bucket,
                target_abi="x86_64-linux")


def _encoders(checkpoint: Path, out: Path, thinker: Thinker, plan: Path,
              opts: LlmExportOptions) -> tuple[dict[str, str], dict[str, Any]]:
    """The vision and audio components, checked; their graphs for the plan."""
    import torch
    from onnxruntime import __version__ as ort_version

    sizes = slice_sizes(thinker, opts.image_sizes)
    preprocessor = [checkpoint / "preprocessor_config.json"]
    with tqdm(total=len(sizes) + len(PIECE_BUCKETS), desc="export minicpm-o 4.5 encoders", unit="graph", leave=False) as bar:
        vision = export_vision(new_component(out / "vision-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker, sizes, bar)
        audio = export_audio(new_component(out / "audio-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker, bar)
    # One task for both: the whole request's greedy ids with their outputs in place.
    media: tuple[ReportCheck, ...] = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    if opts.validate:
        media = media_report(thinker, plan, out, opts.image_sizes[0], opts.threads)
    for kind, result, extra in (("vision", vision, {"slice_sizes": [list(s) for s in sizes]}),
                                ("audio", audio, {"piece_frames": audio["piece_frames"], "pool_step": audio["pool_step"]})):
        identity = _identity(checkpoint, "slices-" + "-".join(vision["graphs"]) if kind == "vision" else
                             f"piece{audio['piece_frames']}")
        numerical = identity_report("numerical", identity, (ReportCheck("embeds_sqnr_db", result["sqnr_db"], ENCODER_SQNR_DB, ">="),))
        task: ValidationReport = identity_report("task", identity, media)
        write_validated(out / f"{kind}-onnx", f"{kind}-onnx", identity, numerical, task, runtime="onnxruntime",
                        runtime_version=ort_version, compiler_version=f"torch-{torch.__version__}",
                        extra_metadata={kind: {"graphs": result["graphs"], "hidden_size": thinker.config.hidden,
                                               "query_num": thinker.config.slices.query_num, **extra}})
    audio["tokens"] = audio_tokens(audio["piece_frames"], audio["pool_step"])
    return vision["graphs"], audio
