"""Voice activity detection for realtime sessions: Silero VAD v6 (the `silero-vad` package's
ONNX graph, the one vLLM-Omni pins by hash) as a hashed component, attached to a plan as its
`voice_activity` section, and the reference the native detector is held to.

The graph scores one 32 ms frame at 16 kHz: 64 samples of the previous frame as context plus
512 new ones, and a recurrent state [2, 1, 128] carried from frame to frame. Turn detection is
vLLM-Omni's streaming hysteresis (`engine/duplex/vad.py`): a turn starts after
`min_speech_duration_ms` of frames at or above `threshold`, and ends only on frames below
`max(threshold - 0.15, 0.01)` once `silence_duration_ms` of silence has accumulated.
"""

from __future__ import annotations

import json
import shutil
from dataclasses import dataclass, field
from importlib import resources
from pathlib import Path
from typing import Any

import numpy as np

from omni_edge.artifacts.writer import identity_report, write_validated
from omni_edge.contracts.manifest import ReportCheck, sha256_file
from omni_edge.files import write_text_atomic

COMPONENT = "vad-onnx"
GRAPH = "silero_vad.onnx"
# The graph vLLM-Omni 0.30 pins (SILERO_VAD_SHA256 in engine/duplex/vad.py), shipped by silero-vad 6.2.
SILERO_SHA256 = "1a153a22f4509e292a94e67d6f9b85e8deb25b4988682b7e174c65279d8788e3"
SAMPLE_RATE = 16_000
FRAME = 512
CONTEXT = 64
STATE_SHAPE = (2, 1, 128)
NEGATIVE_GAP = 0.15  # the end threshold sits this far below the start threshold
# LibriVox speech from Debian's pocketsphinx-testdata: the component's task check, where installed.
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox/sense_and_sensibility_01_austen_64kb-0870.wav")


def silero_graph() -> Path:
    """The package's graph file, checked against the pinned hash."""
    path = Path(str(resources.files("silero_vad") / "data" / GRAPH))
    if sha256_file(path) != SILERO_SHA256:
        raise ValueError(f"{path}: not the Silero VAD v6 graph this project pins (sha256 {SILERO_SHA256[:16]}...)")
    return path


class SileroFrames:
    """The graph on ONNX Runtime (Python), one frame at a time, state and context carried."""

    def __init__(self, graph: Path) -> None:
        import onnxruntime as ort

        options = ort.SessionOptions()
        options.intra_op_num_threads = options.inter_op_num_threads = 1
        self._session = ort.InferenceSession(str(graph), options, providers=["CPUExecutionProvider"])
        self.reset()

    def reset(self) -> None:
        self._state = np.zeros(STATE_SHAPE, np.float32)
        self._context = np.zeros((1, CONTEXT), np.float32)

    def __call__(self, frame: np.ndarray) -> float:
        x = np.concatenate([self._context, frame.reshape(1, FRAME).astype(np.float32)], axis=1)
        prob, self._state = self._session.run(None, {"input": x, "state": self._state,
                                                     "sr": np.array(SAMPLE_RATE, np.int64)})
        self._context = x[:, -CONTEXT:]
        return float(np.asarray(prob).reshape(-1)[0])


def probabilities(score: Any, samples: np.ndarray) -> np.ndarray:
    """Each whole frame's speech probability (a trailing partial frame is not scored)."""
    n = len(samples) // FRAME
    return np.array([score(samples[i * FRAME:(i + 1) * FRAME]) for i in range(n)], np.float32)


@dataclass(frozen=True)
class TurnDetection:
    """OpenAI Realtime's `server_vad` fields, with vLLM-Omni's defaults."""

    threshold: float = 0.5
    prefix_padding_ms: int = 300
    silence_duration_ms: int = 500
    min_speech_duration_ms: int = 96


@dataclass
class Turn:
    start_ms: int  # where speech was detected (before prefix padding)
    end_ms: int | None = None  # the end of the audio when the silence closed the turn
    frames: list[int] = field(default_factory=list)


def turns(probs: np.ndarray, config: TurnDetection = TurnDetection()) -> list[Turn]:
    """The streaming hysteresis over frame probabilities (vLLM-Omni's SileroStreamingVAD.process)."""
    def ms(frames: int) -> int:
        return round(frames * FRAME * 1000 / SAMPLE_RATE)

    min_speech = max(1, round(config.min_speech_duration_ms * SAMPLE_RATE / 1000))
    min_silence = max(1, round(config.silence_duration_ms * SAMPLE_RATE / 1000))
    negative = max(config.threshold - NEGATIVE_GAP, 0.01)
    out: list[Turn] = []
    active, candidate, candidate_start, silence = False, 0, 0, 0
    for i, p in enumerate(probs):
        if active:
            if p >= config.threshold:
                silence = 0
                continue
            if p >= negative and silence == 0:
                continue
            silence += FRAME
            if p >= negative or silence < min_silence:
                continue
            active, silence = False, 0
            out[-1].end_ms = ms(i + 1)
            continue
        if p >= config.threshold:
            if candidate == 0:
                candidate_start = i
            candidate += FRAME
            if candidate >= min_speech:
                active, candidate, silence = True, 0, 0
                out.append(Turn(ms(candidate_start)))
        else:
            candidate = 0
    return out


def export_vad(out_dir: Path) -> Path:
    """`out_dir/vad-onnx`: the pinned graph, its reports and manifest. Numerical: the ONNX graph
    against the package's TorchScript model on the same frames (LibriVox speech where installed,
    then silence and white noise). Task: the LibriVox clip holds one turn or more and silence
    and noise none."""
    import torch

    graph = silero_graph()
    component = out_dir / COMPONENT
    if component.exists():
        shutil.rmtree(component)
    component.mkdir(parents=True)
    shutil.copy2(graph, component / GRAPH)
    rng = np.random.default_rng(0)
    silence = np.zeros(SAMPLE_RATE, np.float32)
    noise = (0.05 * rng.standard_normal(2 * SAMPLE_RATE)).astype(np.float32)
    speech = _librivox()
    onnx_score = SileroFrames(component / GRAPH)
    jit = torch.jit.load(str(graph.with_name("silero_vad.jit")), map_location="cpu").eval()  # type: ignore[no-untyped-call]

    def jit_score(frame: np.ndarray) -> float:
        with torch.no_grad():
            return float(jit(torch.from_numpy(np.ascontiguousarray(frame, np.float32)), SAMPLE_RATE).item())

    worst, signal_power, error_power, found = 0.0, 0.0, 0.0, {}
    for name, signal in (("speech", speech), ("silence", silence), ("noise", noise)):
        if signal is None:
            continue
        onnx_score.reset()
        jit.reset_states()
        a, b = probabilities(onnx_score, signal), probabilities(jit_score, signal)
        worst = max(worst, float(np.abs(a - b).max()))
        signal_power += float(np.sum(b.astype(np.float64) ** 2))
        error_power += float(np.sum((a - b).astype(np.float64) ** 2))
        found[name] = len(turns(a))
    sqnr = 10 * np.log10(signal_power / max(error_power, 1e-30))
    identity = {"checkpoint_id": "silero-vad-v6", "checkpoint_revision": SILERO_SHA256[:16], "precision": "fp32",
                "shape_bucket": f"frame{FRAME}+context{CONTEXT}@16k", "target_abi": "onnx-cpu"}
    numerical = identity_report("numerical", identity, (
        ReportCheck("probability_sqnr_db_vs_torchscript", round(float(min(sqnr, 200.0)), 2), 60.0, ">="),
        ReportCheck("probability_max_abs_vs_torchscript", worst, 1e-4, "<=")))
    expected = {"speech": lambda n: n >= 1, "silence": lambda n: n == 0, "noise": lambda n: n == 0}
    agree = sum(expected[name](n) for name, n in found.items()) / len(found)
    checks = [ReportCheck("turn_agreement", agree, 1.0, ">="),
              ReportCheck("turns_in_silence", float(found["silence"]), 0.0, "<="),
              ReportCheck("turns_in_noise", float(found["noise"]), 0.0, "<=")]
    if "speech" in found:
        checks.append(ReportCheck("turns_in_librivox_speech", float(found["speech"]), 1.0, ">="))
    task = identity_report("task", identity, tuple(checks))
    import onnxruntime

    write_validated(component, COMPONENT, identity, numerical, task, runtime="onnxruntime",
                    runtime_version=onnxruntime.__version__, compiler_version=f"silero-vad {_package_version()}", extra_metadata={"vad": {
                        "sample_rate": SAMPLE_RATE, "frame_samples": FRAME, "context_samples": CONTEXT,
                        "state_shape": list(STATE_SHAPE), "source": "silero-vad 6.2 (PyPI), silero_vad.onnx"}})
    return component


def _package_version() -> str:
    from importlib.metadata import version

    return version("silero-vad")


def _librivox() -> np.ndarray | None:
    if not LIBRIVOX.is_file():
        return None
    import wave

    with wave.open(str(LIBRIVOX)) as w:
        if w.getframerate() != SAMPLE_RATE or w.getsampwidth() != 2 or w.getnchannels() != 1:
            return None
        return np.frombuffer(w.readframes(w.getnframes()), "<i2").astype(np.float32) / 32768.0


def plan_section(plan_path: Path, component: Path) -> dict[str, Any]:
    """The plan's `voice_activity` section naming `component` relative to the plan."""
    import os

    rel = os.path.relpath(component.resolve(), plan_path.parent.resolve())
    return {"artifact": Path(rel).as_posix(), "graphs": {"vad": {"backend": "onnxruntime", "device": "cpu",
                                                                 "graphs": {"frame": GRAPH}}}}


def attach(plan_path: Path, component: Path) -> None:
    """Adds (or replaces) the plan's `voice_activity` section, rewriting the plan atomically."""
    plan = json.loads(plan_path.read_text())
    plan["voice_activity"] = plan_section(plan_path, component)
    write_text_atomic(plan_path, json.dumps(plan, indent=2) + "\n")
