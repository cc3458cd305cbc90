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
engine (plan.talker-onnx.json); with token2wav's files in the checkpoint, token2wav-onnx and the
three-stage plan plan.omni-<fmt>.json follow. --target qnn-htp on such a checkpoint: qnn.py."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, write_validated
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.decoder.export import CPU_LIMITS, checked, export_decoder_lm
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
    if opts.target == "qnn-htp" and (checkpoint / DIRECTORY).is_dir():
        from omni_edge.export.models.minicpmo45.qnn import export_omni_qnn

        return export_omni_qnn(checkpoint, out, thinker, opts)
    return export_loaded(checkpoint, out, thinker, opts)


def export_loaded(checkpoint: Path, out: Path, thinker: Thinker, opts: LlmExportOptions) -> list[Path]:
    """`export` with the thinker loaded (options checked)."""
    plans = export_decoder_lm(thinker.llm, checkpoint, out, opts)
    for plan in {*plans, out / "plan.json"}:
        rewrite_thinker_plan(plan)
    if opts.target != "cpu":
        return plans  # the HTP's stages: qnn.py
    omni = (checkpoint / DIRECTORY).is_dir()  # token2wav's files: the whole omni pipeline
    whole_plans: list[Path] = []
    # A quantized thinker's plans say so (plan.omni-onnx-int4.json); the other stages stay fp32.
    suffix = "" if opts.precision == "fp32" else f"-{opts.precision}"
    for fmt, plan in zip(opts.formats, plans, strict=True):
        if suffix and fmt == "pte":
            whole_plans.append(plan)  # a quantized ExecuTorch thinker: its text plan only (not yet checked with media)
            continue
        # The text plan keeps its own name; plan.<fmt>[-<precision>].json becomes the whole thinker's.
        text = out / f"plan.thinker-{fmt}{suffix}.json"
        shutil.copy2(plan, text)
        whole = _media(checkpoint, out, thinker, plan, text, opts, fmt)
        talker_plan = _talker(checkpoint, out, thinker, opts, fmt)
        whole_plans += [whole, text, talker_plan]
        if omni:
            whole_plans.append(_omni(checkpoint, out, thinker, whole, talker_plan, opts, fmt, suffix))
    shutil.copy2(whole_plans[0], out / "plan.json")
    return whole_plans


def _omni(checkpoint: Path, out: Path, thinker: Thinker, whole: Path, talker_plan: Path, opts: LlmExportOptions,
          fmt: str, suffix: str = "") -> Path:
    """token2wav-onnx (its voice from opts.voice; once per export), for ExecuTorch also token2wav-pte
    (its whole windows as methods: token2wav_pte.py), and the three-stage plan plan.omni-<fmt>.json."""
    from omni_edge.export.models.minicpmo45.reference import load_talker
    from omni_edge.export.models.minicpmo45.talker_export import ROW_GRAPHS
    from omni_edge.export.models.minicpmo45.token2wav_export import export_token2wav, token2wav_stage
    from omni_edge.export.models.minicpmo45.token2wav_files import load_token2wav
    from omni_edge.export.models.minicpmo45.token2wav_pte import export_token2wav_pte

    token2wav = load_token2wav(checkpoint)
    if fmt == opts.formats[0]:
        export_token2wav(checkpoint, out, token2wav, opts.voice, opts.validate)
    meta = json.loads((out / "token2wav-onnx" / "token2wav.json").read_text())
    stage = token2wav_stage("token2wav-onnx", meta, 0, 0)
    if fmt == "pte":
        steady = export_token2wav_pte(checkpoint, out, token2wav.flow, opts.validate)
        stage = {**stage, "artifact": "token2wav-pte", "graphs": {**stage["graphs"], **steady}}
    return omni_plan(out / f"plan.omni-{fmt}{suffix}.json", checkpoint.name, whole, talker_plan, load_talker(checkpoint),
                     thinker.config.hidden, stage, ROW_GRAPHS[fmt])


def _talker(checkpoint: Path, out: Path, thinker: Thinker, opts: LlmExportOptions, fmt: str) -> Path:
    """talker-<fmt>, checked on the thinker reference's spoken reply to the roadmap's request."""
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
    return export_talker(checkpoint, out, load_talker(checkpoint), thinker.llm.model.norm, opts, span, fmt)


def _identity(checkpoint: Path, bucket: str) -> dict[str, str]:
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    return dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32", shape_bucket=bucket,
                target_abi="x86_64-linux")


def _media(checkpoint: Path, out: Path, thinker: Thinker, path: Path, text: Path, opts: LlmExportOptions,
           fmt: str) -> Path:
    """The vision and audio components (vision-<fmt>, audio-<fmt>), each checked against the
    reference modules, and the whole thinker's plan at `path` (encoders -> the thinker of `text`).
    One task report for both: the roadmap's request greedy against the reference (ONNX: through
    the graphs and the engine; ExecuTorch: through the native session on the plan)."""
    import importlib.metadata

    import torch

    from omni_edge.export.models.minicpmo45.pte import export_audio_pte, export_vision_pte, session_media_report

    sizes = slice_sizes(thinker, opts.image_sizes)
    preprocessor = [checkpoint / "preprocessor_config.json"]
    vision_export, audio_export = (export_vision, export_audio) if fmt == "onnx" else (export_vision_pte, export_audio_pte)
    with tqdm(total=len(sizes) + len(PIECE_BUCKETS), desc=f"export minicpm-o 4.5 encoders ({fmt})", unit="graph",
              leave=False) as bar:
        vision = vision_export(new_component(out / f"vision-{fmt}", checkpoint, preprocessor, PREPROCESSOR), thinker, sizes, bar)
        audio = audio_export(new_component(out / f"audio-{fmt}", checkpoint, preprocessor, PREPROCESSOR), thinker, bar)
    audio["tokens"] = audio_tokens(audio["piece_frames"], audio["pool_step"])
    whole = media_plan(path, checkpoint.name, thinker, text, vision["graphs"], audio, fmt)
    runtime = "onnxruntime" if fmt == "onnx" else "executorch"

    def manifests(media: tuple[ReportCheck, ...]) -> None:
        for kind, result, extra in (("vision", vision, {"slice_sizes": [list(s) for s in sizes]}),
                                    ("audio", audio, {"piece_frames": audio["piece_frames"], "pool_step": audio["pool_step"]})):
            identity = _identity(checkpoint, "slices-" + "-".join(vision["graphs"]) if kind == "vision" else
                                 f"piece{audio['piece_frames']}")
            numerical = identity_report("numerical", identity,
                                        (ReportCheck("embeds_sqnr_db", result["sqnr_db"], ENCODER_SQNR_DB, ">="),))
            task: ValidationReport = identity_report("task", identity, media)
            write_validated(out / f"{kind}-{fmt}", f"{kind}-{fmt}", identity, numerical, task, runtime=runtime,
                            runtime_version=importlib.metadata.version(runtime), compiler_version=f"torch-{torch.__version__}",
                            extra_metadata={kind: {"graphs": result["graphs"], "hidden_size": thinker.config.hidden,
                                                   "query_num": thinker.config.slices.query_num, "format": fmt, **extra}})

    media: tuple[ReportCheck, ...] = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    manifests(media)  # a session verifies every component before it runs a request
    if opts.validate:
        # A block-quantized thinker is held, teacher-forced, to what its own decoder report holds it to.
        forced = CPU_LIMITS[opts.precision]["greedy_agreement_64"] if opts.precision in CPU_LIMITS else None
        media = (media_report(thinker, text, out, opts.image_sizes[0], opts.threads, forced) if fmt == "onnx" else
                 session_media_report(thinker, whole, opts.image_sizes[0], opts.threads))
        manifests(media)
    return whole
