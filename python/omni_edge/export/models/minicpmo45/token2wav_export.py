"""MiniCPM-o 4.5's token2wav as the component token2wav-onnx: the four graphs of token2wav_graphs,
the flow decoder's fixed noise (noise.json/.bin: [80, frames], as far as a voice's cache reaches)
and the voices (voices/<name>.json/.bin: the prompt's codes [P], its speaker row after the
flow's affine layer [80], its mel [2P, 80]), all hashed by the manifest: a voice is an export, not
a model on the device.

A voice comes from a 24 kHz WAV (`--voice`): its mel is the recording's; its codes and speaker
vector need the release's S3 tokenizer and CAM++ models, not ported, so they are seeded stand-ins
(the voice's metadata says so).

`GraphChain` steps the graphs as the native vocoder does (caches, trims, noise, Euler loop, HiFT
windows, cross-fade, counter noise), in Python: the component's task report is its PCM against the
PyTorch reference (Token2Wav) fed the same noise, by SQNR."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch.nn import functional as F
from tqdm import tqdm

from omni_edge.artifacts import identity_report, new_component, write_validated
from omni_edge.contracts import ReportCheck
from omni_edge.export.comparison import sqnr_db
from omni_edge.export.models.minicpmo45.flow import Flow
from omni_edge.export.models.minicpmo45.hift import SAMPLES_PER_FRAME
from omni_edge.export.models.minicpmo45.token2wav import (
    CONTEXT,
    KEEP_RECENT,
    MEL_CACHE,
    SILENCE,
    SOURCE_CACHE,
    WINDOW,
    CounterDraws,
    Token2Wav,
    Voice,
    stand_in_voice,
    windows,
)
from omni_edge.export.models.minicpmo45.token2wav_graphs import as_numpy, examples, time_features
from omni_edge.export.targets import onnx_target
from omni_edge.files import write_bytes_atomic, write_text_atomic

PCM_SQNR_DB = 40.0   # the graph chain against the reference, same noise (measured 69 dB on the tiny preset)
CHECK_SEED = 7       # the check's HiFT noise (counter_noise seed)
STEPS = 10           # the flow's Euler steps (upstream's n_timesteps)
CHECK_CODES = 60     # two full windows and a last one of 10


def write_tensors(directory: Path, stem: str, tensors: dict[str, np.ndarray]) -> None:
    """stem.json (the weights index's format) and stem.bin beside it."""
    index: dict[str, Any] = {"file": f"{stem}.bin", "alignment": 64, "tensors": [], "graphs": {}}
    blob = bytearray()
    for name, array in tensors.items():
        blob += b"\0" * ((-len(blob)) % 64)
        raw = np.ascontiguousarray(array).tobytes()
        index["tensors"].append({"name": name, "dtype": array.dtype.name, "shape": list(array.shape),
                                 "offset": len(blob), "nbytes": len(raw)})
        blob += raw
    write_bytes_atomic(directory / f"{stem}.bin", bytes(blob))
    write_text_atomic(directory / f"{stem}.json", json.dumps(index, indent=1) + "\n")


def read_tensors(directory: Path, stem: str) -> dict[str, np.ndarray]:
    index = json.loads((directory / f"{stem}.json").read_text())
    blob = (directory / index["file"]).read_bytes()
    return {t["name"]: np.frombuffer(blob, np.dtype(t["dtype"]), int(np.prod(t["shape"])), t["offset"]).reshape(t["shape"])
            for t in index["tensors"]}


def voice_tensors(flow: Flow, voice: Voice) -> dict[str, np.ndarray]:
    with torch.no_grad():
        speaker = flow.spk_embed_affine_layer(F.normalize(voice.speaker, dim=1))
    return {"codes": voice.tokens[0].numpy().astype(np.int32), "speaker": as_numpy(speaker[0]),
            "mel": as_numpy(voice.mel[0])}


def steady_cache_frames(prompt_frames: int) -> list[int]:
    """The cache lengths a whole window meets after a voice prompt of `prompt_frames`: the prompt's
    frames, then 2 WINDOW more per window until trimming holds them at the prompt's and the last
    KEEP_RECENT (100, 150, 200 for the default voice)."""
    grown = range(prompt_frames, prompt_frames + KEEP_RECENT, 2 * WINDOW)
    return [*grown, prompt_frames + KEEP_RECENT]


def voice_cache_frames(cdir: Path, voice: str = "default") -> list[int]:
    """steady_cache_frames of a token2wav component's voice."""
    return steady_cache_frames(read_tensors(cdir / "voices", voice)["mel"].shape[0])


def noise_frames(prompt_frames: int) -> int:
    """How far into the decoder's noise a stream with this voice reads: the cache's length (the
    prompt's frames and the last KEEP_RECENT) plus the longest window's frames."""
    return prompt_frames + KEEP_RECENT + 2 * (WINDOW + CONTEXT)


@dataclass
class _Caches:
    cnn: np.ndarray
    att: np.ndarray


class GraphChain:
    """The exported graphs stepped as the native vocoder steps them. `steady`: sessions of the
    steady windows' static graphs by file (encoder_steady_f<frames>.onnx, estimator_steady_f<...>:
    the HTP's), run wherever a window has their shapes, as the controller runs them;
    `steady_runs` counts them."""

    def __init__(self, cdir: Path, voice: str = "default", seed: int = CHECK_SEED, threads: int = 0,
                 steady: dict[str, Any] | None = None) -> None:
        self.s = {name: onnx_target.cpu_session(cdir / name, threads)
                  for name in ("encoder.onnx", "encoder_last.onnx", "estimator.onnx", "hift.onnx")}
        self.meta = json.loads((cdir / "token2wav.json").read_text())
        self.noise = read_tensors(cdir, "noise")["noise"]
        self.voice = read_tensors(cdir / "voices", voice)
        self.steady = steady or {}
        self.steady_runs = 0
        self.draws = CounterDraws(seed)
        self.window = np.hamming(2 * SOURCE_CACHE).astype(np.float32)
        steps = self.meta["steps"]
        span = 1 - torch.cos(torch.linspace(0, 1, steps + 1) * 0.5 * torch.pi)
        self.span = span.numpy()

    def _zeros(self, key: str) -> _Caches:
        m = self.meta[key]
        return _Caches(np.zeros(m["cnn"], np.float32), np.zeros(m["att"], np.float32))

    def _flow(self, mu: np.ndarray, cond: np.ndarray) -> np.ndarray:
        offset = self.estimator[0].att.shape[3]
        x = np.ascontiguousarray(self.noise[None, :, offset: offset + mu.shape[2]])
        t, dt = self.span[:1].copy(), np.float32(self.span[1] - self.span[0])
        speaker = self.voice["speaker"][None]
        steady = self.steady.get(f"estimator_steady_f{offset}.onnx") if mu.shape[2] == 2 * WINDOW else None
        for k, cache in enumerate(self.estimator):
            time = {"t": t} if steady is None else {"t_features": time_features(float(t[0]), int(self.meta["time_features"]))}
            # In the graphs' input order: an ExecuTorch method takes its inputs by position.
            feeds = {"x": x, "mu": mu, **time, "speaker": speaker, "cond": cond, "cnn_cache": cache.cnn, "att_cache": cache.att}
            v, cnn, att = (self.s["estimator.onnx"] if steady is None else steady).run(None, feeds)
            self.steady_runs += steady is not None
            x = x + dt * v
            t = t + dt
            if k + 1 < len(self.estimator):
                dt = np.float32(self.span[k + 2] - t[0])
            self.estimator[k] = _Caches(cnn, att)
        return x

    def start(self) -> None:
        self.encoder = self._zeros("encoder")
        self.estimator = [self._zeros("estimator") for _ in range(self.meta["steps"])]
        codes = np.concatenate([self.voice["codes"], np.full(CONTEXT, SILENCE, np.int32)]).astype(np.int64)[None]
        mu = self._encode(codes, last=False)
        self._flow(mu, np.ascontiguousarray(self.voice["mel"].T[None]))
        self.mel = np.zeros((1, mu.shape[1], 0), np.float32)
        self.source = np.zeros((1, 1, SOURCE_CACHE), np.float32)
        self.speech: np.ndarray | None = None

    def _encode(self, codes: np.ndarray, last: bool) -> np.ndarray:
        session = self.s["encoder_last.onnx" if last else "encoder.onnx"]
        steady = self.steady.get(f"encoder_steady_f{self.encoder.att.shape[3]}.onnx")
        if steady is not None and not last and codes.shape[1] == CONTEXT + WINDOW:
            session = steady
            self.steady_runs += 1
        mu, cnn, att = session.run(None, {"codes": codes, "cnn_cache": self.encoder.cnn, "att_cache": self.encoder.att})
        self.encoder = _Caches(cnn, att)
        return mu  # type: ignore[no-any-return]

    def _trim(self, att: np.ndarray) -> np.ndarray:
        prompt = self.voice["mel"].shape[0]
        if att.shape[3] <= prompt + KEEP_RECENT:
            return att
        return np.concatenate([att[:, :, :, :prompt], att[:, :, :, -KEEP_RECENT:]], axis=3)

    def decode(self, codes: list[int], last: bool) -> np.ndarray:
        mu = self._encode(np.array([codes], np.int64), last)
        mel = self._flow(mu, np.zeros_like(mu))
        self.estimator = [_Caches(c.cnn, self._trim(c.att)) for c in self.estimator]
        self.encoder = _Caches(self.encoder.cnn, self._trim(self.encoder.att))
        mel = np.concatenate([self.mel, mel], axis=2)
        phase0, noise = self.draws(mel.shape[2] * SAMPLES_PER_FRAME)
        keep = np.array([0.0 if self.speech is None else 1.0], np.float32)
        speech, source = self.s["hift.onnx"].run(None, {"mel": mel, "phase0": phase0.numpy(), "noise": noise.numpy(),
                                                        "cache_source": self.source, "keep": keep})
        if self.speech is not None:
            speech = speech.copy()
            half = SOURCE_CACHE
            speech[:, :half] = speech[:, :half] * self.window[:half] + self.speech * self.window[half:]
        self.mel, self.source, self.speech = mel[..., -MEL_CACHE:], source[..., -SOURCE_CACHE:], speech[..., -SOURCE_CACHE:]
        return (speech if last else speech[..., :-SOURCE_CACHE]).reshape(-1)  # type: ignore[no-any-return]

    def utterance(self, codes: list[int]) -> np.ndarray:
        self.start()
        return np.concatenate([self.decode(window, last) for window, last in windows(codes)])


def derived_component(out: Path, checkpoint: Path, name: str) -> Path:
    """OUT/name holding token2wav-onnx's files (its dynamic graphs, noise, voices, meta), not its
    manifest or reports: a token2wav component for another runtime adds its steady graphs to it."""
    import shutil

    source = out / "token2wav-onnx"
    cdir = new_component(out / name, checkpoint, required=("config.json",))
    for path in source.iterdir():
        if path.name not in ("manifest.json", "reports"):
            (shutil.copytree if path.is_dir() else shutil.copy2)(path, cdir / path.name)
    return cdir


# The steady graphs' plan groups -> their file or method stem; each group keyed by cache frames.
STEADY_GROUPS = {"steady_encoder": "encoder_steady", "steady_estimator": "estimator_steady"}


def whole_window_codes(count: int, seed: int) -> list[int]:
    """Seeded codes for `count` whole windows and a last one of 7."""
    return [int(v) for v in np.random.default_rng(seed).integers(0, SILENCE, count * WINDOW + 7)]


def steady_check(cdir: Path, steady: dict[str, Any], codes: list[int], window_db: float = PCM_SQNR_DB
                 ) -> tuple[float, int, float]:
    """`codes` through the graph chain of `cdir` with its `steady` sessions (GraphChain's) against
    the dynamic graphs alone, the same HiFT noise: (the PCM's SQNR, the steady graphs' runs, the
    share of windows whose own PCM holds `window_db`)."""
    chains = GraphChain(cdir, steady=steady), GraphChain(cdir)
    for chain in chains:
        chain.start()
    got, ref = [], []
    for window, last in windows(codes):
        got.append(chains[0].decode(window, last))
        ref.append(chains[1].decode(window, last))
    agree = [sqnr_db(r, g) >= window_db for r, g in zip(ref, got, strict=True)]
    return sqnr_db(np.concatenate(ref), np.concatenate(got)), chains[0].steady_runs, sum(agree) / len(agree)


def load_voice(flow: Flow, wav: Path | None, checkpoint: Path | None = None) -> tuple[Voice, dict[str, Any]]:
    """The voice of a WAV (any rate: resampled to 16 and 24 kHz), or of a synthetic recording
    (2 s of a 140 Hz tone with overtones) without one; its codes and speaker vector from the
    release's voice models when `checkpoint` ships them (voice.py), else seeded stand-ins."""
    from omni_edge import _native
    from omni_edge.export.models.minicpmo45.voice import release_voice, voice_models

    if wav is None:
        t = np.arange(2 * 24000) / 24000
        samples = np.sum([0.2 / k * np.sin(2 * np.pi * 140 * k * t) for k in range(1, 6)], axis=0).astype(np.float32)
        pcm, rate, source = samples.tobytes(), 24000, "synthetic (a 140 Hz harmonic tone, 2 s)"
    else:
        pcm, rate = _native.decode_wav(wav.read_bytes())
        source = wav.name

    def at(target: int) -> np.ndarray:
        return np.frombuffer(_native.resample(pcm, rate, target) if rate != target else pcm, np.float32)

    models = voice_models(checkpoint) if checkpoint is not None else None
    if models is not None:
        voice = release_voice(models, at(16000), at(24000))
        how = f"the release's {models[0].name} and {models[1].name} (ONNX Runtime)"
    else:
        voice = stand_in_voice(at(24000), speaker_dim=flow.config.speaker_dim)
        how = "seeded stand-ins (no speech_tokenizer_v2_25hz.onnx / campplus.onnx in the checkpoint)"
    return voice, {"source": source, "prompt_codes": int(voice.tokens.shape[1]), "mel": "the recording's",
                   "codes_and_speaker": how}


def export_token2wav(checkpoint: Path, out: Path, token2wav: Token2Wav, voice_wav: Path | None, validate: bool) -> Path:
    """token2wav-onnx under OUT, one voice ("default") from `voice_wav`."""
    flow, hift = token2wav.flow, token2wav.hift
    cdir = new_component(out / "token2wav-onnx", checkpoint, required=("config.json",))
    graphs = examples(flow, hift)
    with tqdm(total=len(graphs), desc="export minicpm-o 4.5 token2wav", unit="graph", leave=False) as bar:
        for name, (module, example, inputs, outputs, dynamic) in graphs.items():
            onnx_target.export_graph(module, example, inputs, outputs, cdir / name, dynamic_axes=dynamic)
            bar.update(1)
    voice, voice_meta = load_voice(flow, voice_wav, checkpoint)
    (cdir / "voices").mkdir()
    tensors = voice_tensors(flow, voice)
    write_tensors(cdir / "voices", "default", tensors)
    frames = noise_frames(tensors["mel"].shape[0])
    write_tensors(cdir, "noise", {"noise": as_numpy(flow.decoder.rand_noise[0, :, :frames])})
    c = flow.config
    layers, d = c.blocks + c.up_blocks, c.width // c.heads
    meta = {"steps": STEPS, "sample_rate": 24000, "samples_per_frame": SAMPLES_PER_FRAME, "window": WINDOW,
            "context": CONTEXT, "silence": SILENCE, "mel_cache": MEL_CACHE, "source_cache": SOURCE_CACHE,
            "keep_recent": KEEP_RECENT, "mel_bins": c.mel_bins, "vocab": c.vocab,
            "encoder": {"cnn": [1, c.width, 6], "att": [layers, 1, c.heads, 0, 2 * d]},
            "estimator": {"cnn": [c.dit_depth, 2, 2 * c.dit_width, 2], "att": [c.dit_depth, 2, c.dit_heads, 0,
                                                                                2 * c.dit_head_dim]},
            "noise_frames": frames, "time_features": flow.decoder.estimator.t_embedder.freq,
            "voices": {"default": voice_meta}}
    write_text_atomic(cdir / "token2wav.json", json.dumps(meta, indent=1) + "\n")
    revision = json.loads((checkpoint / "config.json").read_text()).get("_name_or_path", "") or "local"
    identity = dict(checkpoint_id=checkpoint.name, checkpoint_revision=revision, precision="fp32",
                    shape_bucket="dynamic", target_abi="x86_64-linux")
    skipped: tuple[ReportCheck, ...] = (ReportCheck("validation_run", 0.0, 1.0, ">="),)
    numerical, task = skipped, skipped
    if validate:
        numerical, task = _checks(cdir, token2wav, voice)
    from onnxruntime import __version__ as ort_version

    write_validated(cdir, "token2wav-onnx", identity, identity_report("numerical", identity, numerical),
                    identity_report("task", identity, task),
                    runtime="onnxruntime", runtime_version=ort_version, compiler_version=f"torch-{torch.__version__}",
                    extra_metadata={"token2wav": meta})
    return cdir


def _checks(cdir: Path, token2wav: Token2Wav, voice: Voice) -> tuple[tuple[ReportCheck, ...], tuple[ReportCheck, ...]]:
    """The graph chain against the reference on CHECK_CODES seeded codes, both drawing HiFT's noise
    from the same counter stream: the whole PCM's SQNR, and the share of bridge windows whose own
    PCM holds the bound."""
    codes = [int(v) for v in np.random.default_rng(4).integers(0, SILENCE, CHECK_CODES)]
    reference = Token2Wav(token2wav.flow, token2wav.hift, STEPS, CounterDraws(CHECK_SEED))
    state = reference.start(voice)
    chain = GraphChain(cdir)
    chain.start()
    ref, got = [], []
    for window, last in windows(codes):
        samples, state = reference.decode(voice, state, window, last)
        ref.append(samples.numpy())
        got.append(chain.decode(window, last))
    agree = [a.shape == b.shape and sqnr_db(a, b) >= PCM_SQNR_DB for a, b in zip(ref, got, strict=True)]
    whole_ref, whole_got = np.concatenate(ref), np.concatenate(got)
    whole = sqnr_db(whole_ref, whole_got) if whole_ref.shape == whole_got.shape else -1e9
    return ((ReportCheck("pcm_sqnr_db", whole, PCM_SQNR_DB, ">="),),
            (ReportCheck("window_agreement", sum(agree) / len(agree), 1.0, ">="),
             ReportCheck("samples", float(whole_got.size), float(whole_ref.size), ">=")))


def token2wav_stage(component: str, meta: dict[str, Any], stage_id: int, talker: int) -> dict[str, Any]:
    """The plan stage (family token2wav) of a token2wav-onnx component `component` (its path
    relative to the plan), reading the codes of stage `talker`."""
    steps = int(meta["steps"])
    times = (1 - torch.cos(torch.linspace(0, 1, steps + 1) * 0.5 * torch.pi)).tolist()

    def group(graphs: dict[str, str]) -> dict[str, Any]:
        return {"backend": "onnxruntime", "device": "cpu", "graphs": {k: {"file": v} for k, v in graphs.items()}}

    keys = ("sample_rate", "samples_per_frame", "window", "context", "silence", "vocab", "mel_bins", "mel_cache",
            "source_cache", "keep_recent", "encoder", "estimator")
    return {"stage_id": stage_id, "model_stage": "code2wav", "execution_type": "llm_generation", "input_sources": [talker],
            "final_output": True, "final_output_type": "audio", "engine_output_type": "audio", "artifact": component,
            "token2wav": {**{k: meta[k] for k in keys}, "times": times, "noise": "noise.json",
                          "voices": {name: f"voices/{name}.json" for name in meta["voices"]}, "voice": "default",
                          "pcm_dtype": "float32", "noise_seed": 0},
            "graphs": {"encoder": group({"window": "encoder.onnx", "last": "encoder_last.onnx"}),
                       "estimator": group({"step": "estimator.onnx"}), "hift": group({"window": "hift.onnx"})}}
