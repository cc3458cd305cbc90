"""`omni-edge export omni --target qnn-htp` (or `export llm`) on a MiniCPM-o 4.5 checkpoint with
token2wav's files: the three stages with every graph the HTP takes compiled for it, per SoC.

The CPU export runs first (its fp32 graphs are what gets compiled; its omni plan is the check's
reference). Then, per SoC of --soc:

    thinker-qnn-<soc>-<precision>/  the thinker's decoder at --precision (w8a16 by default) through
                                    the shared text decoder's HTP path (calibrated, validated)
    vision-qnn-<soc>-fp16/          each slice graph        } fp16: nothing to calibrate, and
    audio-qnn-<soc>-fp16/           each audio piece graph  } what the encoders keep best
    talker-qnn-<soc>-fp16/          the talker's LM (embedding, prefill and decode bodies per
                                    cache, head) re-exported as the HTP takes it (RoPE tables,
                                    the scaled norm fp16 needs); its two prefill-row graphs stay
                                    fp32 on the CPU beside them (see ROW_GRAPHS_ON_CPU)
    token2wav-qnn-<soc>-fp16/       token2wav-onnx's files (its dynamic graphs for the CPU, noise,
                                    voices) and its encoder and Euler step at a whole window's
                                    static shapes for the HTP (see STEADY_WINDOWS)
    plan.omni-qnn-<soc>-<precision>.json  encoders -> thinker -> talker -> token2wav, placement
                                    declared per graph group
    plan.talker-qnn-<soc>-fp16.json the talker alone on the decoder engine

OUT/plan.json becomes the first SoC's omni plan. Validation on the HTP backend (the emulator
here): each compiled graph against its fp32 graph on held-out inputs (SQNR: media the native
preprocessing makes; code sequences through the talker), the talker teacher-forced along the
fp32 talker's greedy codes for the reference thinker's spoken reply (the share of steps whose
pick agrees), held-out codes through token2wav with its steady windows on the HTP against the
CPU's graphs alone (PCM SQNR), and the roadmap's request (red square + 440 Hz tone) through the whole plan in the
native session against the CPU omni plan (thinker ids, codes, PCM; reported, the thinker held to
half: a random thinker's greedy path flips on the HTP's rounding).
"""

from __future__ import annotations

import json
import shutil
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

import numpy as np
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, pending_task
from omni_edge.contracts import ReportCheck, ValidationReport
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.decoder.plan import thinker_stage, write_plan
from omni_edge.export.decoder.qnn import group_files, npu_groups
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.targets import onnx_target, qnn_target
from omni_edge.files import write_text_atomic

STAGE_PRECISION = "fp16"   # the encoders' and the talker's: float, no calibration data needed
ENCODER_SQNR_DB = 35.0     # fp16 on the HTP vs the fp32 graph (tiny fixture, sm8750/x-elite: 52-60 dB)
TALKER_SQNR_DB = 30.0      # each talker graph (tiny fixture: 60+ dB)
FORCED_CODE_AGREEMENT = 0.9
TEXT_AGREEMENT = 0.5       # the whole request's thinker ids against the CPU plan's
PCM_RMS = 1e-3             # the request's speech is not silent
CHECK_CODES = 64
# The talker's prefill rows (condition: the thinker's final norm, a projection and one row of the
# 152k-row text table; text_embed: two rows of that table) run once per thinker token. On the HTP
# each graph would carry its own copy of the table (0.23 GB in fp16 for the release), and the
# thinker's residual rows, squared in its norm, overflow fp16; fp32 on the CPU costs one
# projection per token.
ROW_GRAPHS_ON_CPU = ("condition", "text_embed")
# token2wav's encoder and Euler step at a whole window's static shapes, one pair per cache length
# a window meets (steady_cache_frames: the voice prompt's frames, growing by 50 a window until
# trimming holds them at the prompt's and the last 100): every window but the utterance's last
# runs on the HTP. The voice prompt (once per session) and the last window run the CPU's dynamic
# graphs; HiFT stays on the CPU (its sine source sums the phase over a window's 27,840 samples:
# fp16 on the HTP measured 0.3 dB against fp32). Plan groups: token2wav_export.STEADY_GROUPS.
STEADY_WINDOWS = 5        # whole windows in the check's utterance
TOKEN2WAV_SQNR_DB = 35.0  # each steady graph's outputs (tiny: encoder 61 dB, one Euler step 46-65 dB)
STEADY_PCM_SQNR_DB = 20.0


def export_omni_qnn(checkpoint: Path, out: Path, thinker: Any, opts: LlmExportOptions) -> list[Path]:
    """The CPU export, the thinker through the decoder's HTP path, then per SoC the encoders and
    the talker compiled and the omni plan; returns the plans (omni first). Options checked."""
    from omni_edge.export.decoder.export import export_decoder_lm
    from omni_edge.export.models.minicpmo45.export import export_loaded
    from omni_edge.export.models.minicpmo45.plan import rewrite_thinker_plan

    socs = [(key, qnn_target.check_target(key, opts.precision)[0]) for key in opts.socs]  # refuse before any work
    for key, _ in socs:
        qnn_target.check_target(key, STAGE_PRECISION)
    export_loaded(checkpoint, out, thinker, replace(opts, target="cpu", precision="fp32", formats=("onnx",)))
    text_plans = export_decoder_lm(thinker.llm, checkpoint, out, opts, calibration_prompts(thinker))
    for plan in text_plans:
        rewrite_thinker_plan(plan)
    build = out / ".build-qnn-omni"
    shutil.rmtree(build, ignore_errors=True)
    build.mkdir(parents=True)
    shared = _Shared.make(checkpoint, out, build, thinker, opts)
    plans: list[Path] = []
    for soc_key, soc in socs:
        plans += _soc(shared, soc_key, soc, out / f"plan.qnn-{soc_key}-{opts.precision}.json")
    shutil.rmtree(build)
    shutil.copy2(plans[0], out / "plan.json")
    return [*plans, *text_plans]


def calibration_prompts(thinker: Any) -> list[qnn_target.Prompt]:
    """Spoken-reply prompts with an image and audio, their media rows from the reference modules:
    a quantized thinker's bodies meet the encoders' rows, whose range text alone does not show
    (calibrated on text only, w8a16 lost the request's first token). Not the check's media."""
    import torch
    from PIL import Image

    from omni_edge.export.models.minicpmo45.reference import Media, input_embeddings, render_prompt

    rng = np.random.default_rng(5)
    t = np.arange(40000) / 16000
    ramp = (np.linspace(0, 255, 448)[None, :, None] * np.ones((448, 1, 3))).astype(np.uint8)
    cases = ((ramp, 0.5 * np.sin(2 * np.pi * (200 + 300 * t) * t), "Describe the picture and the sound."),
             (rng.integers(0, 256, (448, 448, 3), dtype=np.uint8), 0.3 * rng.standard_normal(t.size), "What is this?"))
    prompts: list[qnn_target.Prompt] = []
    for pixels, sound, text in cases:
        media = [Media("image", Image.fromarray(pixels)), Media("audio", sound.astype(np.float32))]
        ids = list(thinker.tokenizer.encode(render_prompt(thinker, media, text, speech=True), add_special_tokens=False))
        slots = [i for i, token in enumerate(ids) if token == thinker.token("<unk>")]
        with torch.no_grad():
            rows = input_embeddings(thinker, ids, media)[0, slots].numpy()
        prompts.append((ids, rows, slots))
    return prompts


@dataclass
class _Shared:
    """What every SoC's components are compiled and checked from."""

    checkpoint: Path
    out: Path
    build: Path
    opts: LlmExportOptions
    cpu_plan: Path                          # plan.omni-onnx.json
    media: dict[str, dict[str, str]]        # vision / audio -> graph key -> fp32 file
    media_held_out: dict[str, list[list[np.ndarray]]]
    talker_groups: dict[str, Any]           # the talker's fp32 graphs as the HTP takes them
    talker_llm: dict[str, Any]
    talker_held_out: dict[str, list[list[np.ndarray]]]
    rows: np.ndarray                        # the reference's spoken reply as the talker's prefill
    codes: list[int]                        # the fp32 talker's greedy codes for them
    reference: Any                          # the CPU omni plan's result for the roadmap's request
    steady_held_out: dict[str, list[list[np.ndarray]]]  # token2wav's steady graphs' inputs
    steady_fp32_sqnr: float                 # the steady graphs in fp32 against the dynamic ones (PCM)
    talker: Any
    thinker_norm: Any                       # the thinker's final norm (the talker's condition graph)

    @classmethod
    def make(cls, checkpoint: Path, out: Path, build: Path, thinker: Any, opts: LlmExportOptions) -> _Shared:
        from omni_edge.export.models.minicpmo45.reference import load_talker

        cpu_plan = out / "plan.omni-onnx.json"
        stages = {s["model_stage"]: s for s in json.loads(cpu_plan.read_text())["stages"]}
        media = {kind: dict(stages[f"{kind}_encoder"]["graphs"]["encoder"]["graphs"]) for kind in ("vision", "audio")}
        for kind, graphs in media.items():
            for file in graphs.values():
                qnn_target.prepare_graph(out / f"{kind}-onnx" / file, build / ("fp32_" + file), fuse_norms=False)
        talker = load_talker(checkpoint)
        groups, llm = _talker_graphs(build, checkpoint, talker, stages["talker"], opts)
        rows, codes = _spoken_reply(out, thinker, talker, opts)
        rng = np.random.default_rng(11)
        sequences = [codes[::-1], rng.integers(0, talker.config.eos, 40).tolist()]
        held_out = qnn_target.capture_calibration(build / "plan.talker-fp32.json", sequences, 4, 4, opts.threads)
        reference = _omni_request(cpu_plan, opts.threads) if opts.validate else None
        steady, steady_sqnr = _steady_graphs(build, checkpoint, out)
        return cls(checkpoint, out, build, opts, cpu_plan, media, _media_samples(thinker, media, opts), groups, llm,
                   held_out, rows, codes, reference, steady, steady_sqnr, talker, thinker.llm.model.norm)


def _steady_graphs(build: Path, checkpoint: Path, out: Path) -> tuple[dict[str, list[list[np.ndarray]]], float]:
    """token2wav's steady-window graphs (build/token2wav-steady/, prepared copies beside), their
    inputs while the chain speaks held-out codes (the fp32 static graphs standing in), and that
    chain's PCM against the dynamic graphs alone (SQNR: summation order only)."""
    from omni_edge.export.models.minicpmo45.token2wav_export import steady_check, voice_cache_frames, whole_window_codes
    from omni_edge.export.models.minicpmo45.token2wav_files import load_token2wav
    from omni_edge.export.models.minicpmo45.token2wav_graphs import steady_examples

    cdir = build / "token2wav-steady"
    cdir.mkdir()
    source = out / "token2wav-onnx"
    flow = load_token2wav(checkpoint).flow
    names = []
    for frames in voice_cache_frames(source):
        for name, (module, example, inputs, outputs) in steady_examples(flow, frames).items():
            onnx_target.export_graph(module, example, inputs, outputs, cdir / name)
            qnn_target.prepare_graph(cdir / name, build / ("fp32_" + name), fuse_norms=False)
            names.append(name)
    samples: dict[str, list[list[np.ndarray]]] = {}

    class _Recorded:  # a session that keeps the inputs it was run on
        def __init__(self, name: str) -> None:
            self.name, self.session = name, onnx_target.cpu_session(cdir / name)

        def run(self, outputs: Any, feeds: dict[str, np.ndarray]) -> Any:
            samples.setdefault(self.name.removesuffix(".onnx"), []).append(list(feeds.values()))
            return self.session.run(outputs, feeds)

    sqnr, _, _ = steady_check(source, {name: _Recorded(name) for name in names}, whole_window_codes(STEADY_WINDOWS, seed=9))
    return samples, sqnr


def _talker_graphs(build: Path, checkpoint: Path, talker: Any, stage: dict[str, Any],
                   opts: LlmExportOptions) -> tuple[dict[str, Any], dict[str, Any]]:
    """The talker's LM graphs exported as the HTP takes them (build/talker-fp32/, prepared copies
    beside) and the engine's llm section; build/plan.talker-fp32.json runs them on the CPU."""
    from omni_edge.export.decoder.graphs import DecoderShape
    from omni_edge.export.decoder.onnx import export_onnx
    from omni_edge.export.models.minicpmo45.talker_export import talker_lm

    lm = talker_lm(talker)
    shape = DecoderShape.from_config(lm.config)
    llm = {**json.loads((build.parent / "plan.talker-onnx.json").read_text())["stages"][0]["llm"],
           "mask_value": qnn_target.QDQ_MASK_VALUE}
    caches = list(llm["kv"]["buckets"])
    cdir = build / "talker-fp32"
    cdir.mkdir()
    shutil.copy2(checkpoint / "tokenizer.json", cdir / "tokenizer.json")
    htp = replace(opts, target="qnn-htp", precision=STAGE_PRECISION)
    with tqdm(total=3 + 2 * len(caches), desc="export talker graphs for the HTP", unit="graph", leave=False) as bar:
        groups = export_onnx(cdir, lm, shape, htp, caches, bar, rope_table=caches[-1] + opts.prefill_chunk)
    groups["lm_head"].pop("options", None)
    write_text_atomic(build / "plan.talker-fp32.json", json.dumps(
        {"plan_version": 1, "name": "talker fp32 (HTP form)", "stages": [thinker_stage("talker-fp32", llm, groups)]}))
    for file in group_files(groups).values():
        qnn_target.prepare_graph(cdir / file, build / ("fp32_" + file), fuse_norms=False)
    return groups, llm


def _spoken_reply(out: Path, thinker: Any, talker: Any, opts: LlmExportOptions) -> tuple[np.ndarray, list[int]]:
    """The reference thinker's spoken reply to the roadmap's request as the talker's prefill rows
    (the CPU component's row graphs), and the fp32 talker's greedy codes after them."""
    import torch

    from omni_edge.export.models.minicpmo45.reference import generate
    from omni_edge.export.models.minicpmo45.talker_export import engine_codes, prefill_rows, row_sessions
    from omni_edge.export.models.minicpmo45.validation import MEDIA_TOKENS, QUESTION, request

    with torch.no_grad():
        _, reply = generate(thinker, request(opts.image_sizes[0]), QUESTION, MEDIA_TOKENS, speech=True, ignore_stop=True)
    assert reply.prenorm is not None
    rows = prefill_rows(row_sessions(out / "talker-onnx", "onnx"), talker, reply.ids, reply.prenorm)
    return rows, engine_codes(out / "plan.talker-onnx.json", rows, talker.config.eos, CHECK_CODES, opts.threads)


def _media_samples(thinker: Any, media: dict[str, dict[str, str]], opts: LlmExportOptions
                   ) -> dict[str, list[list[np.ndarray]]]:
    """Held-out encoder inputs as the native preprocessing makes them: every slice graph's strips
    of a flat colour, noise and a gradient at the export's image sizes; every audio piece graph's
    padded pieces of a tone, a chirp and noise (one past 10 s for the larger piece graph)."""
    from PIL import Image

    from omni_edge.export.models.minicpmo45.audio import log_mel_pieces
    from omni_edge.export.models.minicpmo45.onnx import bucket_of, slice_key
    from omni_edge.export.models.minicpmo45.vision import patch_strip, slice_image

    rng = np.random.default_rng(7)
    patch, out = thinker.config.vision.patch, {}
    vision: dict[str, list[list[np.ndarray]]] = {}
    for width, height in opts.image_sizes:
        ramp = np.linspace(0, 255, width)[None, :, None] * np.ones((height, 1, 3))
        for pixels in (np.full((height, width, 3), rng.integers(0, 256, 3)), rng.integers(0, 256, (height, width, 3)), ramp):
            sliced = slice_image(Image.fromarray(pixels.astype(np.uint8)), thinker.config.slices)
            for x, (h, w) in zip(sliced.slices, sliced.sizes, strict=True):
                vision.setdefault(slice_key(h // patch, w // patch), []).append([patch_strip(x, patch)[None]])
    out.update({f"vision:{k}": v for k, v in vision.items() if k in media["vision"]})
    buckets = [int(k) for k in media["audio"]]
    for seconds, seed in ((3.1, 1), (12.5, 2)):
        t = np.arange(int(seconds * 16000)) / 16000
        for sound in (0.5 * np.sin(2 * np.pi * 330 * t), 0.5 * np.sin(2 * np.pi * (150 + 60 * t) * t),
                      0.2 * np.random.default_rng(seed).standard_normal(t.size)):
            for mel in log_mel_pieces(sound.astype(np.float32), thinker.config.audio.mel_bins):
                frames = bucket_of(mel.shape[1], buckets)
                padded = np.zeros((1, mel.shape[0], frames), np.float32)
                padded[0, :, :mel.shape[1]] = mel
                out.setdefault(f"audio:{frames}", []).append([padded, np.array([mel.shape[1]], np.int64)])
    return out


@dataclass
class _Omni:
    """One request through an omni plan: the thinker's ids, the talker's codes, the PCM, placements."""

    ids: list[int]
    codes: list[int]
    pcm: np.ndarray
    placements: list[dict[str, Any]]


def _omni_request(plan: Path, threads: int) -> _Omni:
    """The roadmap's request (red square + 2 s tone) through `plan` in the native session, greedy."""
    from omni_edge.export.models.minicpmo45.validation import MEDIA_TOKENS, QUESTION, request
    from omni_edge.runtime import OmniSession
    from omni_edge.runtime.media import wav_bytes

    image, tone = (m.value for m in request((448, 448)))
    with tempfile.TemporaryDirectory() as tmp:
        image.save(Path(tmp) / "red.png")
        (Path(tmp) / "tone.wav").write_bytes(wav_bytes(np.asarray(tone, np.float32), 16000))
        session = OmniSession.open(plan, allow_unqualified=True, threads=threads)
        got = session.run(QUESTION, chat=True, media=[("image", str(Path(tmp) / "red.png")), ("audio", str(Path(tmp) / "tone.wav"))],
                          max_new_tokens=MEDIA_TOKENS, ignore_stop_tokens=True, max_frames=CHECK_CODES,
                          speech_sampling={"temperature": 0.0, "seed": 0})
    ids = [t for e in got.text_events for t in e.get("token_ids", [])]
    return _Omni(ids, [frame[0] for frame in session.codes()], got.pcm, session.placements())


def prefix_share(got: list[int], ref: list[int]) -> float:
    """The share of `ref` that `got` repeats before their first difference."""
    n = next((i for i, (a, b) in enumerate(zip(got, ref, strict=False)) if a != b), min(len(got), len(ref)))
    return n / max(len(ref), 1)


def forced_agreement(reference_plan: Path, plan: Path, rows: np.ndarray, codes: list[int], eos: int, min_codes: int,
                     threads: int) -> float:
    """Both talker engines fed the same prefill rows and then the reference's codes: the share of
    steps at which their picks (the end masked for the first `min_codes`) agree."""
    from omni_edge import _native

    engines = [_native.LlmEngine.open(str(p), threads) for p in (reference_plan, plan)]
    n = rows.shape[0]
    logits = [np.frombuffer(e.feed([0] * n, rows.tobytes(), list(range(n))), np.float32).copy() for e in engines]
    agree = 0
    for step, code in enumerate(codes):
        if step < min_codes:
            for row in logits:
                row[eos] = -np.inf
        agree += int(np.argmax(logits[0]) == np.argmax(logits[1]))
        logits = [np.frombuffer(e.feed([code]), np.float32).copy() for e in engines]
    return agree / max(len(codes), 1)


def _soc(s: _Shared, soc_key: str, soc: Any, text_plan: Path) -> list[Path]:
    """One SoC's encoder and talker components, its plans, and their checks."""
    from omni_edge.export.models.minicpmo45.export import PREPROCESSOR
    from omni_edge.export.models.minicpmo45.talker import MIN_CODES

    fp16 = qnn_target.PRECISIONS[STAGE_PRECISION]
    identity = dict(checkpoint_id=s.checkpoint.name, checkpoint_revision="local", precision=STAGE_PRECISION,
                    shape_bucket="", target_abi=f"qnn-htp-v{soc.htp_arch}")
    components: dict[str, tuple[Path, dict[str, Any], dict[str, float]]] = {}
    preprocessor = [s.checkpoint / "preprocessor_config.json"]
    for kind, graphs in tqdm(s.media.items(), desc=f"compile encoders for {soc_key}", unit="encoder", leave=False):
        cdir = new_component(s.out / f"{kind}-qnn-{soc_key}-{STAGE_PRECISION}", s.checkpoint, preprocessor, PREPROCESSOR)
        refs = {key: qnn_target.compile_context(s.build / ("fp32_" + file), cdir, soc, fp16).name for key, file in graphs.items()}
        sqnr = qnn_target.graph_sqnr(s.out / f"{kind}-onnx", cdir, {f"{kind}:{k}": f for k, f in graphs.items()},
                                     s.media_held_out) if s.opts.validate else {}
        components[kind] = (cdir, {"encoder": refs}, sqnr)
    talker = s.talker
    cdir = new_component(s.out / f"talker-qnn-{soc_key}-{STAGE_PRECISION}", s.checkpoint)
    files = group_files(s.talker_groups)
    for file in tqdm(files.values(), desc=f"compile talker for {soc_key}", unit="graph", leave=False):
        qnn_target.compile_context(s.build / ("fp32_" + file), cdir, soc, fp16)
    _row_graphs(cdir, talker, s.thinker_norm)
    npu = npu_groups(s.talker_groups)
    talker_plan = write_plan(s.out, f"{s.checkpoint.name} talker (QNN HTP {soc_key}, {STAGE_PRECISION})",
                             {**thinker_stage(cdir.name, s.talker_llm, npu), "final_output_type": "codes"},
                             f"plan.talker-qnn-{soc_key}-{STAGE_PRECISION}.json")
    sqnr = qnn_target.graph_sqnr(s.build / "talker-fp32", cdir, {k: f for k, f in files.items() if not k.startswith("embed")},
                                 s.talker_held_out) if s.opts.validate else {}
    components["talker"] = (cdir, npu, sqnr)
    components["token2wav"] = _token2wav_component(s, soc_key, soc)
    plan = _omni_plan(s, soc_key, text_plan, components)
    checks: dict[str, tuple[ReportCheck, ...]] = {kind: (ReportCheck("validation_run", 0.0, 1.0, ">="),) for kind in components}
    facts: dict[str, Any] = {}
    if s.opts.validate:
        _write(components, identity, soc, fp16, {k: pending_task(identity).checks for k in components}, {})
        forced = forced_agreement(s.out / "plan.talker-onnx.json", talker_plan, s.rows, s.codes, talker.config.eos,
                                  MIN_CODES, s.opts.threads)
        got = _omni_request(plan, s.opts.threads)
        ref = s.reference
        assert ref is not None
        text = prefix_share(got.ids, ref.ids)
        pcm_rms = float(np.sqrt(np.mean(got.pcm ** 2))) if got.pcm.size else 0.0
        facts = {"text_ids_equal_share": round(text, 4), "codes": len(got.codes),
                 "codes_equal_share": round(prefix_share(got.codes, ref.codes), 4),
                 "pcm_sqnr_db": round(sqnr_db(ref.pcm, got.pcm), 2) if got.pcm.shape == ref.pcm.shape else None,
                 "placements": _placement_counts(got.placements)}
        session = (ReportCheck("omni_text_agreement", text, TEXT_AGREEMENT, ">="), ReportCheck("omni_pcm_rms", pcm_rms, PCM_RMS, ">="))
        checks = {kind: session for kind in components}
        checks["talker"] = (*session, ReportCheck("forced_code_agreement", forced, FORCED_CODE_AGREEMENT, ">="))
        checks["token2wav"] = (*session, ReportCheck("steady_fp32_pcm_sqnr_db", s.steady_fp32_sqnr, 60.0, ">="),
                               *_steady_pcm(s, components["token2wav"][0]))
    _write(components, identity, soc, fp16, checks, facts)
    return [plan, talker_plan]


def _token2wav_component(s: _Shared, soc_key: str, soc: Any) -> tuple[Path, dict[str, Any], dict[str, float]]:
    """token2wav-qnn-<soc>-fp16: token2wav-onnx's files (the CPU's graphs, noise, voices) and the
    steady graphs compiled; its plan groups; the steady graphs' SQNR on held-out inputs."""
    from omni_edge.export.models.minicpmo45.token2wav_export import STEADY_GROUPS, derived_component

    cdir = derived_component(s.out, s.checkpoint, f"token2wav-qnn-{soc_key}-{STAGE_PRECISION}")
    fp16 = qnn_target.PRECISIONS[STAGE_PRECISION]
    files = {path.name.removeprefix("fp32_").removesuffix(".onnx"): path.name.removeprefix("fp32_")
             for path in sorted(s.build.glob("fp32_*_steady_f*.onnx"))}
    groups: dict[str, Any] = {group: {"backend": "onnxruntime", "device": "npu", "graphs": {}} for group in STEADY_GROUPS}
    for group, stem in STEADY_GROUPS.items():
        for name, file in files.items():
            if name.startswith(stem + "_f"):
                ctx = qnn_target.compile_context(s.build / ("fp32_" + file), cdir, soc, fp16)
                groups[group]["graphs"][name.removeprefix(stem + "_f")] = ctx.name  # keyed by the cache's frames
    sqnr = qnn_target.graph_sqnr(s.build / "token2wav-steady", cdir, files, s.steady_held_out,
                                 all_outputs=True) if s.opts.validate else {}
    return cdir, groups, sqnr


def steady_sessions(cdir: Path) -> dict[str, Any]:
    """A token2wav HTP component's steady graphs on the HTP backend, by the file they were compiled
    from (GraphChain's `steady`)."""
    import onnxruntime as ort

    return {path.name.removesuffix("_ctx.onnx") + ".onnx": ort.InferenceSession(str(path), qnn_target.htp_session_options())
            for path in sorted(cdir.glob("*_steady_f*_ctx.onnx"))}


def _steady_pcm(s: _Shared, cdir: Path) -> tuple[ReportCheck, ...]:
    """Held-out codes through the graph chain with the steady windows on the HTP, against the
    CPU's graphs alone (the same HiFT noise): the PCM's SQNR and how many steady runs there were."""
    from omni_edge.export.models.minicpmo45.token2wav_export import steady_check, whole_window_codes

    sqnr, runs, _ = steady_check(cdir, steady_sessions(cdir), whole_window_codes(STEADY_WINDOWS, seed=3))
    steps = int(json.loads((cdir / "token2wav.json").read_text())["steps"])
    return (ReportCheck("steady_pcm_sqnr_db", sqnr, STEADY_PCM_SQNR_DB, ">="),
            ReportCheck("steady_graph_runs", float(runs), float(STEADY_WINDOWS * (1 + steps)), ">="))


def _row_graphs(cdir: Path, talker: Any, norm: Any) -> None:
    """The talker's prefill-row graphs (fp32, for the CPU) in its HTP component; `norm`: the thinker's final norm."""
    import torch

    from omni_edge.export.models.minicpmo45.talker_export import ROW_GRAPHS, ConditionGraph, TextEmbedGraph

    ids = torch.zeros(1, 1, dtype=torch.int64)
    condition, text_embed = ROW_GRAPHS["onnx"]
    onnx_target.export_graph(ConditionGraph(talker, norm).eval(), (ids, torch.zeros(1, 1, talker.config.llm_dim)),
                             ["ids", "hidden"], ["rows"], cdir / condition)
    onnx_target.export_graph(TextEmbedGraph(talker).eval(), (ids,), ["ids"], ["rows"], cdir / text_embed)
    onnx_target.share_weights(cdir, [condition, text_embed])


def _placement_counts(placements: list[dict[str, Any]]) -> dict[str, int]:
    """How many of the session's graphs run where: {"onnxruntime/npu": 17, ...}."""
    counts: dict[str, int] = {}
    for p in placements:
        key = f"{p.get('backend')}/{p.get('device')}"
        counts[key] = counts.get(key, 0) + 1
    return counts


def _omni_plan(s: _Shared, soc_key: str, text_plan: Path, components: dict[str, tuple[Path, dict[str, Any], dict[str, float]]]
               ) -> Path:
    """The CPU omni plan with every stage but token2wav moved to this SoC's components."""
    from omni_edge.export.models.minicpmo45.talker_export import ROW_GRAPHS

    plan = json.loads(s.cpu_plan.read_text())
    stages = {st["model_stage"]: st for st in plan["stages"]}
    for kind in ("vision", "audio"):
        cdir, graphs, _ = components[kind]
        stage = stages[f"{kind}_encoder"]
        stage["artifact"] = cdir.name
        stage["graphs"]["encoder"] = {"backend": "onnxruntime", "device": "npu", "graphs": graphs["encoder"]}
    text = json.loads(text_plan.read_text())["stages"][0]
    thinker = stages["thinker"]
    thinker.update(artifact=text["artifact"], graphs=text["graphs"],
                   llm={**thinker["llm"], "kv": text["llm"]["kv"], "mask_value": text["llm"]["mask_value"]})
    cdir, npu, _ = components["talker"]
    talker = stages["talker"]
    talker["artifact"] = cdir.name
    talker["codec_lm"]["decoder"]["mask_value"] = s.talker_llm["mask_value"]
    rows = {role: {"backend": "onnxruntime", "device": "cpu", "graphs": {"step": ref}}
            for role, ref in zip(ROW_GRAPHS_ON_CPU, ROW_GRAPHS["onnx"], strict=True)}
    talker["graphs"] = {**npu, **rows}
    cdir, steady, _ = components["token2wav"]
    code2wav = stages["code2wav"]
    code2wav["artifact"] = cdir.name
    code2wav["graphs"] = {**code2wav["graphs"], **steady}
    precision = s.opts.precision
    plan["name"] = (f"{s.checkpoint.name} (image + audio + text -> text + speech; encoders, thinker ({precision}) and talker "
                    f"on the {soc_key} HTP, token2wav on the CPU)")
    path = s.out / f"plan.omni-qnn-{soc_key}-{precision}.json"
    write_text_atomic(path, json.dumps(plan, indent=2) + "\n")
    return path


def _write(components: dict[str, tuple[Path, dict[str, Any], dict[str, float]]], identity: dict[str, str], soc: Any,
           precision: qnn_target.Precision, task_checks: dict[str, tuple[ReportCheck, ...]], facts: dict[str, Any]) -> None:
    """Each component's reports (its own graphs' SQNR; the request's checks) and manifest."""
    for kind, (cdir, graphs, sqnr) in components.items():
        limit = {"talker": TALKER_SQNR_DB, "token2wav": TOKEN2WAV_SQNR_DB}.get(kind, ENCODER_SQNR_DB)
        kind_identity = {**identity, "shape_bucket": "-".join(k for g in graphs.values() for k in g.get("graphs", g))}
        checks = tuple(ReportCheck(f"graph_sqnr_db.{name}", value, limit, ">=") for name, value in sorted(sqnr.items()))
        numerical = identity_report("numerical", kind_identity, checks or (ReportCheck("validation_run", 0.0, 1.0, ">="),))
        task: ValidationReport = identity_report("task", kind_identity, task_checks[kind])
        qnn_target.write_component(cdir, kind_identity, numerical, task, soc, precision,
                                   {kind: {"graphs": graphs, "sqnr_db": {k: round(v, 2) for k, v in sqnr.items()},
                                           **({"row_graphs_on_cpu": list(ROW_GRAPHS_ON_CPU)} if kind == "talker" else {}),
                                           "omni_request": facts}})
