"""`omni-edge export llm` on a Qwen2.5-Omni checkpoint (thinker-only or a release): three ONNX
components with hashed manifests and reports measured against transformers, and two plans:
OUT/plan.json (the vision and audio encoders as entry stages feeding the thinker: image + audio
+ text -> text) and OUT/plan.onnx.json (the thinker alone, text -> text).

    thinker-onnx/  the decoder as `export llm` writes a Qwen3 (embedding, prefill/decode per
                   bucket, LM head), its body taking M-RoPE positions [3, 1, N]; the plan's
                   decoder says `position_rows: 3`. Validated like any LLM (text, native engine).
    vision-onnx/   the vision encoder, one graph per image grid (`vision_<t>x<h>x<w>.onnx`).
    audio-onnx/    the audio encoder, one graph per chunk of 2 n_window mel frames.

The media report of the thinker runs a whole image + audio request: the encoders' graphs on
ONNX Runtime, their outputs spliced into the prompt at its placeholders, the native engine with
the prompt's M-RoPE rows, greedy, against transformers' generate on the same processed inputs.
"""

from __future__ import annotations

import json
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
import torch
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, write_validated
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export import onnx_target
from omni_edge.export.comparison import FP32_TIE_GAP, sqnr_db
from omni_edge.export.qwen3 import Qwen3Shape
from omni_edge.export.qwen25_omni import Thinker, load_thinker, processors, reference_inputs
from omni_edge.export.qwen25_omni_graphs import AudioChunkGraph, ThinkerParts, VisionGraph, chunk_tokens
from omni_edge.files import write_text_atomic
from omni_edge.runtime.media import wav_bytes

PREPROCESSOR = ("tokenizer.json", "config.json", "preprocessor_config.json")  # what each encoder component needs
THINKER_CONFIG = "thinker_config.json"
ENCODER_SQNR_DB = 60.0  # fp32 graphs vs the transformers modules: summation order only (measured 120-145 dB)
MEDIA_TOKENS = 16       # greedy tokens of the media report's request


def image_grid(checkpoint: Path, width: int, height: int) -> tuple[int, int, int]:
    """The (t, h, w) patch grid the checkpoint's image processor gives an image of that size."""
    from PIL import Image

    grid = processors(checkpoint).image(images=[Image.new("RGB", (width, height))], return_tensors="np")["image_grid_thw"][0]
    return int(grid[0]), int(grid[1]), int(grid[2])


def _identity(checkpoint: Path, bucket: str) -> dict[str, str]:
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    return dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32", shape_bucket=bucket,
                target_abi="x86_64-linux")


_report = identity_report


def _manifest(cdir: Path, component: str, identity: dict[str, str], numerical: ValidationReport,
              task: ValidationReport, extra: dict[str, Any]) -> None:
    from onnxruntime import __version__ as ort_version

    write_validated(cdir, component, identity, numerical, task, runtime="onnxruntime", runtime_version=ort_version,
                    compiler_version=f"torch-{torch.__version__}", extra_metadata=extra)


def _session(path: Path) -> Any:
    import onnxruntime as ort

    return ort.InferenceSession(str(path), providers=["CPUExecutionProvider"])


# ---- vision ------------------------------------------------------------------------------------

def _export_vision(cdir: Path, thinker: Thinker, grids: list[tuple[int, int, int]], progress: tqdm) -> dict[str, Any]:
    """One graph per grid; each checked against transformers on random patches of that grid."""
    visual, c = thinker.model.model.visual, thinker.config.vision_config
    width = c.in_channels * c.temporal_patch_size * c.patch_size ** 2
    graphs, sqnrs = {}, []
    for grid in grids:
        name = f"vision_{grid[0]}x{grid[1]}x{grid[2]}.onnx"
        progress.set_postfix_str(name)
        patches = torch.randn(grid[0] * grid[1] * grid[2], width, generator=torch.Generator().manual_seed(0))
        onnx_target.export_graph(VisionGraph(visual, grid).eval(), (patches,), ["pixel_values"], ["image_embeds"], cdir / name)
        with torch.no_grad():
            ref = thinker.model.model.get_image_features(patches, torch.tensor([grid])).pooler_output
        ref = torch.cat(list(ref)) if isinstance(ref, (list, tuple)) else ref
        got = _session(cdir / name).run(None, {"pixel_values": patches.numpy()})[0]
        sqnrs.append(sqnr_db(ref.numpy(), got))
        graphs["x".join(map(str, grid))] = name
        progress.update()
    onnx_target.share_weights(cdir, list(graphs.values()))
    return {"graphs": graphs, "sqnr_db": min(sqnrs)}


# ---- audio -------------------------------------------------------------------------------------

def run_audio_chunks(session: Any, features: np.ndarray, chunk_frames: int) -> np.ndarray:
    """An audio's tokens from its mel features [mel, frames]: the chunk graph per chunk, zero-padded
    past the last chunk's frames, keeping the tokens each chunk holds."""
    frames = features.shape[1]
    out = []
    for start in range(0, frames, chunk_frames):
        n = min(chunk_frames, frames - start)
        chunk = np.zeros((1, features.shape[0], chunk_frames), np.float32)
        chunk[0, :, :n] = features[:, start:start + n]
        tokens = session.run(None, {"features": chunk, "length": np.array([n], np.int64)})[0]
        out.append(tokens[0, :chunk_tokens(n)])
    return np.concatenate(out)


def _export_audio(cdir: Path, thinker: Thinker, progress: tqdm) -> dict[str, Any]:
    """The chunk graph, checked against transformers on 2.6 chunks of random features (a tail)."""
    tower = thinker.model.model.audio_tower
    if tower.n_window % 2:
        raise ValueError(f"audio n_window {tower.n_window} is odd: a chunk's tokens would straddle two chunks")
    graph = AudioChunkGraph(tower).eval()
    name = "audio_chunk.onnx"
    progress.set_postfix_str(name)
    mel = tower.num_mel_bins
    example = (torch.zeros(1, mel, graph.frames), torch.tensor([graph.frames]))
    onnx_target.export_graph(graph, example, ["features", "length"], ["audio_embeds"], cdir / name)
    frames = int(2.6 * graph.frames)
    features = torch.randn(1, mel, frames, generator=torch.Generator().manual_seed(1))
    with torch.no_grad():
        ref = thinker.model.model.get_audio_features(features, torch.ones(1, frames, dtype=torch.long)).last_hidden_state
    got = run_audio_chunks(_session(cdir / name), features[0].numpy(), graph.frames)
    progress.update()
    onnx_target.share_weights(cdir, [name])
    return {"graphs": {"chunk": name}, "chunk_frames": graph.frames, "sqnr_db": sqnr_db(ref.numpy(), got),
            "frames_checked": frames}


def _encoder_component(out: Path, checkpoint: Path, kind: str, result: dict[str, Any], media: ValidationReport,
                       extra: dict[str, Any]) -> None:
    cdir = out / f"{kind}-onnx"
    identity = _identity(checkpoint, "grids-" + "-".join(result["graphs"]) if kind == "vision" else
                         f"chunk{result['chunk_frames']}")
    numerical = _report("numerical", identity, (ReportCheck("embeds_sqnr_db", result["sqnr_db"], ENCODER_SQNR_DB, ">="),))
    task = _report("task", identity, media.checks)
    _manifest(cdir, f"{kind}-onnx", identity, numerical, task, {kind: {"graphs": result["graphs"], **extra}})


# ---- a whole request: the media report ---------------------------------------------------------

def _request_media(directory: Path, size: tuple[int, int]) -> list[tuple[str, Path]]:
    """A red square of the first image size and a 2.5 s 440 Hz tone at 24 kHz (resampled on the way)."""
    from PIL import Image

    image, audio = directory / "red_square.png", directory / "tone_440hz.wav"
    Image.new("RGB", size, (255, 0, 0)).save(image)
    t = np.arange(int(2.5 * 24000)) / 24000
    audio.write_bytes(wav_bytes(0.5 * np.sin(2 * np.pi * 440 * t), 24000))
    return [("image", image), ("audio", audio)]


@dataclass(frozen=True)
class Encoders:
    """Where the exported encoder graphs are: image grid "txhxw" -> graph, the audio chunk graph."""

    vision: dict[str, Path]
    audio: Path
    chunk_frames: int

    @classmethod
    def of(cls, out: Path) -> Encoders:
        """The encoders an export wrote into OUT, from their manifests."""
        vision = json.loads((out / "vision-onnx" / "manifest.json").read_text())["metadata"]["vision"]
        audio = json.loads((out / "audio-onnx" / "manifest.json").read_text())["metadata"]["audio"]
        return cls({g: out / "vision-onnx" / f for g, f in vision["graphs"].items()},
                   out / "audio-onnx" / audio["graphs"]["chunk"], int(audio["chunk_frames"]))


def media_generate(checkpoint: Path, thinker: Thinker, plan: Path, encoders: Encoders, inputs: dict[str, Any],
                   max_new_tokens: int, threads: int = 0) -> tuple[list[int], list[float]]:
    """Greedy ids of one processed request through the exported graphs: encoders on ONNX Runtime,
    the thinker on the native engine with their outputs spliced in and the prompt's M-RoPE rows.
    Also returns, per step, the engine's top-2 logit gap (how decided each pick was)."""
    from omni_edge import _native
    from omni_edge.runtime.media import mrope_positions

    config = thinker.config
    ids = [int(t) for t in inputs["input_ids"][0]]
    rows: dict[int, list[np.ndarray]] = {config.image_token_index: [], config.audio_token_index: []}
    grids: list[tuple[int, int, int]] = []
    if "pixel_values" in inputs:
        start = 0
        for grid_t in inputs["image_grid_thw"]:
            grid = (int(grid_t[0]), int(grid_t[1]), int(grid_t[2]))
            n = grid[0] * grid[1] * grid[2]
            name = "x".join(map(str, grid))
            if name not in encoders.vision:
                raise ValueError(f"no vision graph for the image grid {name} (exported: {', '.join(encoders.vision)})")
            session = _session(encoders.vision[name])
            rows[config.image_token_index].append(
                session.run(None, {"pixel_values": inputs["pixel_values"][start:start + n].numpy()})[0])
            grids.append(grid)
            start += n
    if "input_features" in inputs:
        session = _session(encoders.audio)
        for features, mask in zip(inputs["input_features"], inputs["feature_attention_mask"], strict=True):
            n = int(mask.sum())
            rows[config.audio_token_index].append(run_audio_chunks(session, features[:, :n].numpy(), encoders.chunk_frames))
    media = {token: iter(np.concatenate(r)) if r else iter(()) for token, r in rows.items()}
    positions = [p for p, t in enumerate(ids) if t in media]
    spliced = np.stack([next(media[ids[p]]) for p in positions]).astype(np.float32) if positions else np.zeros((0,))
    table, next_position = mrope_positions(ids, json.loads((checkpoint / "config.json").read_text()), grids)
    engine = _native.LlmEngine.open(str(plan), threads)
    engine.set_position_table(table.tolist(), next_position)
    logits = np.frombuffer(engine.feed(ids, spliced.tobytes(), positions), np.float32)
    got: list[int] = []
    gaps: list[float] = []
    for _ in range(max_new_tokens):
        top2 = np.sort(logits)[-2:]
        gaps.append(float(top2[1] - top2[0]))
        got.append(int(np.argmax(logits)))
        logits = np.frombuffer(engine.feed([got[-1]]), np.float32)
    return got, gaps


def _media_report(checkpoint: Path, thinker: Thinker, plan: Path, encoders: Encoders, size: tuple[int, int],
                  identity: dict[str, str], threads: int) -> ValidationReport:
    with tempfile.TemporaryDirectory() as tmp:
        media = _request_media(Path(tmp), size)
        inputs = reference_inputs(checkpoint, thinker, media, "What do you see and hear?", chat=True)
        with torch.no_grad():
            ref = thinker.model.generate(**inputs, max_new_tokens=MEDIA_TOKENS, do_sample=False, min_new_tokens=MEDIA_TOKENS,
                                         output_logits=True, return_dict_in_generate=True)
        ref_ids = [int(t) for t in ref.sequences[0, inputs["input_ids"].shape[1]:]]
        got, _ = media_generate(checkpoint, thinker, plan, encoders, inputs, MEDIA_TOKENS, threads)
    # Along the path: a pick agrees when it is transformers' or one of its near ties.
    first_difference = next((i for i, (a, b) in enumerate(zip(got, ref_ids, strict=True)) if a != b), MEDIA_TOKENS)
    agree = 1.0
    if first_difference < MEDIA_TOKENS:
        logits = ref.logits[first_difference][0].double().numpy()
        tie = float(logits.max() - logits[got[first_difference]]) < FP32_TIE_GAP
        agree = first_difference / MEDIA_TOKENS if not tie else 1.0
    return _report("task", identity, (
        ReportCheck("media_greedy_agreement", agree, 1.0, ">="),
        ReportCheck("media_prompt_tokens", float(inputs["input_ids"].shape[1]), 1.0, ">="),
    ))


def session_agreement(checkpoint: Path, thinker: Thinker, plan: Path, image: tuple[int, int]) -> float:
    """Greedy agreement of a whole image + audio request through the native session on `plan`
    (whatever runs its encoders) with transformers' generate: the share of the reference's tokens
    before the first difference that is not a near tie."""
    import tempfile

    from omni_edge.runtime import Session

    with tempfile.TemporaryDirectory() as tmp:
        media = _request_media(Path(tmp), image)
        inputs = reference_inputs(checkpoint, thinker, media, "What do you see and hear?", chat=True)
        with torch.no_grad():
            ref = thinker.model.generate(**inputs, max_new_tokens=MEDIA_TOKENS, min_new_tokens=MEDIA_TOKENS,
                                         do_sample=False, output_logits=True, return_dict_in_generate=True)
        ref_ids = [int(t) for t in ref.sequences[0, inputs["input_ids"].shape[1]:]]
        got: list[int] = []

        def collect(event: dict[str, Any]) -> bool:
            got.extend(event.get("token_ids", []))
            return True

        Session.open(plan, allow_unqualified=True).run("What do you see and hear?", chat=True, on_event=collect,
                                                       media=[(k, str(p)) for k, p in media],
                                                       max_new_tokens=MEDIA_TOKENS, ignore_stop_tokens=True)
    for i, (a, b) in enumerate(zip(got, ref_ids, strict=False)):
        if a != b:
            logits = ref.logits[i][0].double().numpy()
            return 1.0 if float(logits.max() - logits[a]) < FP32_TIE_GAP else i / MEDIA_TOKENS
    return 1.0 if len(got) == MEDIA_TOKENS else len(got) / MEDIA_TOKENS


# ---- the command -------------------------------------------------------------------------------

def export_omni_llm(checkpoint: Path, out: Path, opts: Any) -> list[Path]:
    """The thinker, vision and audio components and the thinker's plan (OUT/plan.json); a vision
    graph for the patch grid of each of opts.image_sizes (width, height)."""
    from omni_edge.export import llm

    if opts.target == "qnn-htp":
        from omni_edge.export.qwen25_omni_qnn import export_encoders_qnn

        return export_encoders_qnn(checkpoint, out, opts)
    if opts.target != "cpu" or not set(opts.formats) <= {"onnx", "pte"} or opts.precision not in ("", "fp32"):
        raise ValueError("a Qwen2.5-Omni checkpoint exports to --format onnx, pte or both at fp32 on the CPU (and its "
                         "encoders to --target qnn-htp) so far")
    opts = replace(opts, precision="fp32")
    thinker = load_thinker(checkpoint)
    parts = ThinkerParts(thinker.model)
    shape = Qwen3Shape.from_config(parts.config)
    if not shape.mrope_section:
        raise ValueError(f"{checkpoint}: the thinker's rope_parameters have no mrope_section")
    caches = llm._caches(shape, opts)
    image_sizes = opts.image_sizes
    if not image_sizes:
        raise ValueError("--image-sizes: at least one image size")
    grids = sorted({image_grid(checkpoint, w, h) for w, h in image_sizes})
    out.mkdir(parents=True, exist_ok=True)
    with tqdm(total=3 + 2 * len(caches) + len(grids) + 1, desc="export qwen2.5-omni", unit="graph", leave=False) as bar:
        preprocessor = [checkpoint / "preprocessor_config.json"]
        vision = _export_vision(new_component(out / "vision-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker,
                                grids, bar)
        audio = _export_audio(new_component(out / "audio-onnx", checkpoint, preprocessor, PREPROCESSOR), thinker, bar)
        cdir = new_component(out / "thinker-onnx", checkpoint)
        # The placeholder ids the runtime reads: the thinker's config (a release nests it).
        (cdir / THINKER_CONFIG).write_text(thinker.config.to_json_string())
        graphs = llm._export_onnx(cdir, parts, shape, opts, caches, bar)
    section = {**llm._llm_section(shape, opts, caches), "position_rows": 3}
    plan = llm._write_plan(out, f"{checkpoint.name} (onnx, {opts.kv} KV)", llm._stage("thinker-onnx", section, graphs))
    encoders = Encoders({g: out / "vision-onnx" / f for g, f in vision["graphs"].items()},
                        out / "audio-onnx" / audio["graphs"]["chunk"], audio["chunk_frames"])
    identity = _identity(checkpoint, "ctx" + "-".join(map(str, caches)) + f"-n{opts.prefill_chunk}")
    skipped = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    numerical, task = _report("numerical", identity, skipped), _report("task", identity, skipped)
    media = task
    if opts.validate:
        from omni_edge.export.validation import validate_llm

        numerical, task = validate_llm(thinker.model, plan, cdir / "tokenizer.json", identity, True, threads=opts.threads)
        media = _media_report(checkpoint, thinker, plan, encoders, image_sizes[0], identity, opts.threads)
        task = replace(task, checks=task.checks + media.checks)
    # An encoder's task is the thinker's: the whole request's greedy ids with its output spliced in.
    _encoder_component(out, checkpoint, "vision", vision, media, {"hidden_size": shape.hidden})
    _encoder_component(out, checkpoint, "audio", audio, media, {"chunk_frames": audio["chunk_frames"],
                                                                "hidden_size": shape.hidden})
    _manifest(cdir, "thinker-onnx", identity, numerical, task, {
        "llm": {"kv": opts.kv, "caches": caches, "prefill_chunk": opts.prefill_chunk, "format": "onnx"},
        "omni": {"vision": "vision-onnx", "audio": "audio-onnx", "image_grids": [list(g) for g in grids],
                 "skipped": thinker.skipped}})
    multimodal = multimodal_plan(out / "plan.json", checkpoint.name, thinker, json.loads(plan.read_text())["stages"][0],
                                 vision["graphs"], audio["graphs"], audio["chunk_frames"], grids)
    plans = [multimodal, plan]
    if "pte" in opts.formats:
        from omni_edge.export.qwen25_omni_pte import export_omni_pte

        plans += export_omni_pte(checkpoint, out, opts, thinker, grids, audio["chunk_frames"])
    return plans


def multimodal_plan(path: Path, name: str, thinker: Thinker, thinker_stage: dict[str, Any], vision: dict[str, Any],
                    audio: dict[str, Any], chunk_frames: int, grids: list[tuple[int, int, int]], fmt: str = "onnx",
                    backend: str = "onnxruntime") -> Path:
    """The image and audio encoders (components vision-FMT, audio-FMT; their graph references) as
    entry stages whose rows feed the thinker."""
    hidden = int(thinker.config.text_config.hidden_size)
    v = thinker.config.vision_config
    widths = {"image": v.in_channels * v.temporal_patch_size * v.patch_size ** 2,
              "audio": thinker.config.audio_config.num_mel_bins}

    def encoder(stage_id: int, kind: str, modality: str, graphs: dict[str, Any], **extra: Any) -> dict[str, Any]:
        return {"stage_id": stage_id, "model_stage": f"{kind}_encoder", "execution_type": "llm_generation", "input_sources": [],
                "engine_output_type": "embeddings", "artifact": f"{kind}-{fmt}",
                "encoder": {"modality": modality, "preprocessor": "preprocessor_config.json", "hidden_size": hidden,
                            "input_width": widths[modality], **extra},
                "graphs": {"encoder": {"backend": backend, "device": "cpu", "graphs": graphs}}}

    reader = {**thinker_stage, "stage_id": 2, "input_sources": [0, 1],
              "llm": {**thinker_stage["llm"], "media": {"config": THINKER_CONFIG}}}
    # An encoder event carries one item's rows: the largest image's, or 30 s of audio (750 tokens).
    largest = max([g[0] * g[1] * g[2] // 4 for g in grids] + [750]) * hidden * 4
    plan = {"plan_version": 1, "name": f"{name} (image + audio -> text, {fmt})",
            "stages": [encoder(0, "vision", "image", vision),
                       encoder(1, "audio", "audio", audio, chunk_frames=chunk_frames), reader],
            "stream_limits": {"max_events": 64, "max_bytes": max(1 << 20, 2 * largest)}}
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path
