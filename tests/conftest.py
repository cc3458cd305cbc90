from __future__ import annotations

import os
from pathlib import Path

import pytest
from llm_reference import QNN_SOCS, cli, random_qwen3_checkpoint, unseen_peaked_checkpoint
from main_job import copy_artifact, copy_checkpoint
from omni_edge.runtime import implementations

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

    out, wanted = tmp_path_factory.mktemp("ckpt") / "qwen3-tiny", recipe("tiny", seed=0)
    return (copy_checkpoint("tiny", out, lambda record: {k: record.get(k) for k in wanted} == wanted)
            or make_checkpoint(out, preset="tiny", seed=0))


@pytest.fixture(scope="session")
def ring_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.registry import make_checkpoint

    # Compared with transformers only: it need not be peaked, so it trains briefly.
    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "qwen3-tiny-swa16", preset="tiny", seed=1, sliding_window=16,
                           train_steps=100)


@pytest.fixture(scope="session")
def tiny_artifact(tiny_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Both formats, full KV over buckets 128 and 256, prefill chunks of 16."""
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    out = tmp_path_factory.mktemp("artifact") / "tiny"
    if copy_artifact("tiny", tiny_checkpoint, out, TINY_EXPORT) is None:
        export_checkpoint(tiny_checkpoint, out, LlmExportOptions(formats=tuple(TINY_EXPORT["formats"]),
                                                                 prefill_chunk=TINY_EXPORT["prefill_chunk"],
                                                                 buckets=tuple(TINY_EXPORT["buckets"])))
    return out


@pytest.fixture(scope="session")
def ring_artifact(ring_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    out = tmp_path_factory.mktemp("artifact") / "ring"
    export_checkpoint(ring_checkpoint, out, LlmExportOptions(formats=("onnx", "pte"), prefill_chunk=8, kv="ring"))
    return out


# ---- the NPU route: a checkpoint the project never made, exported for the HTP ---------------
@pytest.fixture(scope="session")
def unseen(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return unseen_peaked_checkpoint(tmp_path_factory.mktemp("qnn") / "unseen-qwen3")


@pytest.fixture(scope="session")
def qnn_artifact(unseen: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("qnn") / "artifact"
    done = cli("export", "llm", "--checkpoint", str(unseen), "--out", str(out), "--target", "qnn-htp",
                "--precision", "w8a16", "--soc", ",".join(QNN_SOCS), "--share-weights", "--buckets", "128,256",
                "--prefill-chunk", "16", "--keep-qdq")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


# ---- a checkpoint the project never made: random Qwen3 weights, default export ----------------
@pytest.fixture(scope="session")
def random_artifact(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint, artifact): random untrained weights and their own tokenizer, exported by the CLI
    with its defaults (full KV, buckets 512/1024) in both formats. The unseen-checkpoint test reads
    400 tokens of it on the host, the device tests on the aarch64 bundle under qemu."""
    work = tmp_path_factory.mktemp("random-qwen3")
    checkpoint = random_qwen3_checkpoint(work / "ckpt")
    done = cli("export", "llm", "--checkpoint", str(checkpoint), "--out", str(work / "artifact"), "--format", "both")
    assert done.returncode == 0, done.stderr[-3000:]
    return checkpoint, work / "artifact"


# ---- speech ---------------------------------------------------------------------------------
@pytest.fixture(scope="session")
def tts_checkpoint(tmp_path_factory: pytest.TempPathFactory) -> Path:
    from omni_edge.export.registry import make_checkpoint

    return make_checkpoint(tmp_path_factory.mktemp("ckpt") / "qwen3-tts-tiny", arch="qwen3-tts", preset="tiny", seed=0)


@pytest.fixture(scope="session")
def tts_artifact(tts_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The exported speech plan (talker bucket 256, prefill chunk 16, default stream shape)."""
    from omni_edge.export.options import TtsExportOptions
    from omni_edge.export.registry import export_checkpoint

    out = tmp_path_factory.mktemp("speech")
    export_checkpoint(tts_checkpoint, out, TtsExportOptions(prefill_chunk=16, buckets=(256,), validation_frames=8))
    return out / "plan.json"
