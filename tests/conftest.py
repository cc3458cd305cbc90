from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import pytest
from llm_reference import QNN_SOCS, cli, random_qwen3_checkpoint, unseen_peaked_checkpoint
from main_job import copy_artifact, copy_checkpoint
from omni_edge.runtime import implementations
from session_once import made_once

os.environ.setdefault("TOKENIZERS_PARALLELISM", "false")


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """The device-build tests run last: scripts/test.sh starts the cross builds in the background
    before lint, and their fixture waits for those (a build directory's lock) only at the end."""
    items.sort(key=lambda item: item.get_closest_marker("device_builds") is not None)


@pytest.fixture(params=["python", "native"])
def impl(request: pytest.FixtureRequest) -> implementations.Implementation:
    """The same test runs against the Python reference and the native controller."""
    return implementations.get(request.param)


# ---- checkpoints and artifacts, built once per test session -------------------------------
# The tests' default text export; `omni-edge demo --model tiny` makes the same (tests/main_job.py).
TINY_EXPORT = {"formats": ["onnx", "pte"], "prefill_chunk": 16, "buckets": [128, 256]}


@pytest.fixture(scope="session")
def tiny_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.models.qwen3.checkpoint import recipe
    from omni_edge.export.registry import make_checkpoint

    wanted = recipe("tiny", seed=0)
    return made_once(tmp_path_factory, "ckpt/qwen3-tiny",
                     lambda out: copy_checkpoint("tiny", out, lambda record: {k: record.get(k) for k in wanted} == wanted)
                     or make_checkpoint(out, preset="tiny", seed=0))


@pytest.fixture(scope="session")
def ring_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.registry import make_checkpoint

    # Compared with transformers only: it need not be peaked, so it trains briefly.
    return made_once(tmp_path_factory, "ckpt/qwen3-tiny-swa16",
                     lambda out: make_checkpoint(out, preset="tiny", seed=1, sliding_window=16, train_steps=100))


@pytest.fixture(scope="session")
def tiny_artifact(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both formats, full KV over buckets 128 and 256, prefill chunks of 16."""
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    def make(out: Path) -> None:
        if copy_artifact("tiny", tiny_checkpoint, out, TINY_EXPORT) is None:
            export_checkpoint(tiny_checkpoint, out, LlmExportOptions(formats=tuple(TINY_EXPORT["formats"]),
                                                                     prefill_chunk=TINY_EXPORT["prefill_chunk"],
                                                                     buckets=tuple(TINY_EXPORT["buckets"])))

    return made_once(tmp_path_factory, "artifact/tiny", make)


@pytest.fixture(scope="session")
def ring_artifact(ring_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    return made_once(tmp_path_factory, "artifact/ring", lambda out: export_checkpoint(
        ring_checkpoint, out, LlmExportOptions(formats=("onnx", "pte"), prefill_chunk=8, kv="ring")))


# ---- the NPU route: a checkpoint the project never made, exported for the HTP ---------------
@pytest.fixture(scope="session")
def unseen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return made_once(tmp_path_factory, "qnn/unseen-qwen3", unseen_peaked_checkpoint)


@pytest.fixture(scope="session")
def qnn_artifact(unseen: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    def make(out: Path) -> None:
        done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(out), "--target", "qnn-htp",
                   "--precision", "w8a16", "--soc", ",".join(QNN_SOCS), "--share-weights", "--buckets", "128,256",
                   "--prefill-chunk", "16", "--keep-qdq")
        assert done.returncode == 0, done.stderr[-3000:]

    return made_once(tmp_path_factory, "qnn/artifact", make)


# ---- a checkpoint the project never made: random Qwen3 weights, default export ----------------
@pytest.fixture(scope="session")
def random_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint, artifact): random untrained weights and their own tokenizer, exported by the CLI
    with its defaults (full KV, buckets 512/1024) in both formats. The unseen-checkpoint test reads
    400 tokens of it on the host, the device tests on the aarch64 bundle under qemu."""

    def make(work: Path) -> None:
        checkpoint = random_qwen3_checkpoint(work / "ckpt")
        done = cli("export", "llm", "--checkpoint", str(checkpoint), "--out", str(work / "artifact"), "--format", "both")
        assert done.returncode == 0, done.stderr[-3000:]

    work = made_once(tmp_path_factory, "random-qwen3", make)
    return work / "ckpt", work / "artifact"


# ---- speech ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def tts_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.registry import make_checkpoint

    return made_once(tmp_path_factory, "ckpt/qwen3-tts-tiny",
                     lambda out: make_checkpoint(out, arch="qwen3-tts", preset="tiny", seed=0))


@pytest.fixture(scope="session")
def tts_artifact(tts_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exported speech plan (talker bucket 256, prefill chunk 16, default stream shape)."""
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint

    return made_once(tmp_path_factory, "speech", lambda out: export_checkpoint(
        tts_checkpoint, out, TtsExportOptions(prefill_chunk=16, buckets=(256,), validation_frames=8))) / "plan.json"


# ---- omni: the tiny thinker's export, a talker reading its hidden states, one plan ------------
@pytest.fixture(scope="session")
def omni_speech_checkpoint(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.registry import make_checkpoint

    return made_once(tmp_path_factory, "omni/talker", lambda out: make_checkpoint(
        out, arch="qwen3-tts", preset="tiny", thinker=tiny_checkpoint))


@pytest.fixture(scope="session")
def omni_plan(tiny_artifact: Path, omni_speech_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """thinker (tiny_artifact's ONNX export) -> talker -> vocoder, as one plan."""
    from omni_edge.export.omni import write_omni_plan
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint

    def make(out: Path) -> None:
        export_checkpoint(omni_speech_checkpoint, out / "speech", TtsExportOptions(prefill_chunk=16, buckets=(256,),
                                                                                    validation_frames=8))
        write_omni_plan(tiny_artifact / "plan.onnx.json", out / "speech" / "plan.json", out / "plan")

    return made_once(tmp_path_factory, "omni/plan", make) / "plan" / "plan.json"


# ---- a multimodal thinker: Qwen2.5-Omni's, tiny, with its vision and audio encoders ---------
@pytest.fixture(scope="session")
def omni_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    def make(out: Path) -> None:
        done = cli("make-checkpoint", "--arch", "qwen2.5-omni", "--preset", "tiny", "--out", str(out))
        assert done.returncode == 0, done.stderr[-3000:]

    return made_once(tmp_path_factory, "qwen25-omni/qwen25-omni-tiny", make)


@pytest.fixture(scope="session")
def omni_artifact(omni_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """`export llm` on the thinker: thinker, vision (448x448) and audio components, validated."""
    def make(out: Path) -> None:
        done = cli("export", "llm", "--checkpoint", str(omni_checkpoint), "--out", str(out), "--buckets", "512",
                   "--prefill-chunk", "16", "--format", "both")
        assert done.returncode == 0, done.stderr[-3000:]

    return made_once(tmp_path_factory, "qwen25-omni/artifact", make)


@pytest.fixture(scope="session")
def voice_plan(omni_checkpoint: Path, omni_artifact: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The multimodal thinker (omni_artifact) with a talker reading its hidden states and the
    vocoder, joined by `export omni`: a plan that hears and speaks, with the voice activity
    detector of realtime sessions (vad-onnx)."""
    from omni_edge.export.omni import write_omni_plan
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint, make_checkpoint

    def make(out: Path) -> None:
        talker = make_checkpoint(out / "talker", arch="qwen3-tts", preset="tiny", thinker=omni_checkpoint)
        export_checkpoint(talker, out / "speech", TtsExportOptions(prefill_chunk=16, buckets=(256,), validation_frames=8))
        write_omni_plan(omni_artifact / "plan.json", out / "speech" / "plan.json", out / "omni")

    return made_once(tmp_path_factory, "qwen25-omni/voice", make) / "omni" / "plan.json"


# ---- a π0 policy of sizes no preset has (tests/pi0_unseen.py), and a scene for it ----------
@pytest.fixture(scope="session")
def policy_plan(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.models.pi0.checkpoint import make_checkpoint as make_pi0
    from pi0_unseen import ACTION_SPEC, CAMERAS, UNSEEN

    def make(root: Path) -> None:
        checkpoint = make_pi0(root / "ckpt", "unseen", seed=7, p=UNSEEN)
        (root / "spec.json").write_text(json.dumps(ACTION_SPEC))
        done = cli("export", "policy", "--checkpoint", str(checkpoint), "--out", str(root / "art"), "--cameras",
                   ",".join(CAMERAS), "--prompt-tokens", "24", "--max-observation-age-ms", "5000", "--format", "both",
                   "--action-spec", str(root / "spec.json"))
        assert done.returncode == 0, done.stderr[-3000:]

    return made_once(tmp_path_factory, "pi0-unseen", make) / "art" / "plan.json"


@pytest.fixture(scope="session")
def scene(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """Two odd-sized camera images (one wide, one tall: both padded), a short state, fixed noise."""
    import numpy as np
    from pi0_unseen import CAMERAS, UNSEEN
    from PIL import Image

    def make(root: Path) -> None:
        root.mkdir(parents=True)
        rng = np.random.default_rng(3)
        for camera, (w, h) in zip(CAMERAS, ((301, 97), (90, 211)), strict=True):
            Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(root / f"{camera}.png")
        np.save(root / "noise.npy", rng.standard_normal((UNSEEN.chunk, UNSEEN.action_dim)).astype(np.float32))

    root = made_once(tmp_path_factory, "pi0-scene", make)
    return {"dir": root, "state": [0.3, -0.2, 0.9], "noise": np.load(root / "noise.npy")}


# ---- an InternVLA-A1 policy of sizes no preset has (tests/internvla_unseen.py), its scene and
# ---- vLLM-Omni's own chunk for it --------------------------------------------------------------
@pytest.fixture(scope="session")
def internvla(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    """{"checkpoint", "plan" (ONNX Runtime), "pte_plan", "scene", "upstream": vLLM-Omni's chunk on
    the scene's two-frame history}."""
    import numpy as np
    from internvla_unseen import ACTION_SPEC, CAMERAS, UNSEEN, load_scene, make_scene, upstream_actions
    from omni_edge.export.models.internvla_a1.checkpoint import make_checkpoint as make_internvla

    def make(root: Path) -> None:
        checkpoint = make_internvla(root / "ckpt", "unseen", seed=5, p=UNSEEN)
        (root / "spec.json").write_text(json.dumps(ACTION_SPEC))
        done = cli("export", "policy", "--checkpoint", str(checkpoint), "--out", str(root / "art"), "--cameras",
                   ",".join(CAMERAS), "--max-observation-age-ms", "5000", "--format", "both",
                   "--action-spec", str(root / "spec.json"))
        assert done.returncode == 0, done.stderr[-3000:]
        scene = make_scene(root / "scene")
        np.save(root / "upstream.npy", upstream_actions(checkpoint, scene, (0, 1), root))

    root = made_once(tmp_path_factory, "internvla-unseen", make)
    scene = load_scene(root / "scene")
    return {"checkpoint": root / "ckpt", "plan": root / "art" / "plan.json", "pte_plan": root / "art" / "plan.pte.json",
            "scene": scene, "upstream": np.load(root / "upstream.npy")}
