"""The Qwen3-TTS-shaped reference: a checkpoint in the standard layout that round-trips,
refuses other shapes, and whose streaming vocoder equals the offline decode within a bound
measured here (exactly, while the left context still holds the whole history)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from numeric import assert_sqnr
from omni_edge.export.models.qwen3_tts.reference import (
    CODE_GROUPS,
    SAMPLES_PER_FRAME,
    Qwen3Tts,
    Sampling,
    decode_offline,
    decode_streaming,
    generate_codes,
)
from omni_edge.export.speech import StreamShape
from tokenizers import Tokenizer

# Measured on the tiny checkpoint (120 frames, chunks 1 + 25 with 72 frames of left context):
# SQNR 79 dB over the whole utterance; float32 rounding only (133 dB) while the context is whole.
STREAM_SQNR_DB = 60.0
ROUNDING_SQNR_DB = 100.0


@pytest.fixture(scope="module")
def model(tts_checkpoint: Path) -> Qwen3Tts:
    return Qwen3Tts.from_pretrained(tts_checkpoint)


@pytest.fixture(scope="module")
def codes(model: Qwen3Tts, tts_checkpoint: Path) -> torch.Tensor:
    ids = Tokenizer.from_file(str(tts_checkpoint / "tokenizer.json")).encode("Streaming speech, frame by frame.").ids
    return generate_codes(model, ids, max_frames=120)


def test_checkpoint_layout_and_round_trip(model: Qwen3Tts, tts_checkpoint: Path, tmp_path: Path) -> None:
    for rel in ("config.json", "model.safetensors", "tokenizer.json", "speech_tokenizer/config.json",
                "speech_tokenizer/model.safetensors"):
        assert (tts_checkpoint / rel).is_file(), rel
    config = json.loads((tts_checkpoint / "config.json").read_text())
    assert config["model_type"] == "qwen3_tts" and config["talker_config"]["code_predictor"]["num_code_groups"] == 16
    model.save_pretrained(tmp_path / "copy")
    shutil.copy(tts_checkpoint / "tokenizer.json", tmp_path / "copy")
    again = Qwen3Tts.from_pretrained(tmp_path / "copy")
    for (name, a), (_, b) in zip(model.state_dict().items(), again.state_dict().items(), strict=True):
        assert torch.equal(a, b), name


def test_other_shapes_and_missing_files_are_refused(tts_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"no config\.json"):
        Qwen3Tts.from_pretrained(tmp_path)
    bad = tmp_path / "bad"
    shutil.copytree(tts_checkpoint, bad)
    config = json.loads((bad / "config.json").read_text())
    config["talker_config"]["decoder"]["num_hidden_layers"] += 1
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="do not match the architecture"):
        Qwen3Tts.from_pretrained(bad)
    config["talker_config"]["decoder"]["num_hidden_layers"] -= 1
    config["model_type"] = "qwen3"
    (bad / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="is not 'qwen3_tts'"):
        Qwen3Tts.from_pretrained(bad)


def test_codes_are_deterministic_and_in_range(model: Qwen3Tts, codes: torch.Tensor, tts_checkpoint: Path) -> None:
    assert codes.shape == (120, CODE_GROUPS)
    assert int(codes.min()) >= 0 and int(codes.max()) < model.ids.codebook_size  # no control id is ever spoken
    ids = Tokenizer.from_file(str(tts_checkpoint / "tokenizer.json")).encode("Streaming speech, frame by frame.").ids
    assert torch.equal(generate_codes(model, ids, max_frames=120), codes)
    sampled = [generate_codes(model, ids, 12, Sampling(temperature=0.9, top_k=20, seed=s)) for s in (1, 1, 2)]
    assert torch.equal(sampled[0], sampled[1]) and not torch.equal(sampled[0], sampled[2])


def test_streaming_equals_offline_within_the_measured_bound(model: Qwen3Tts, codes: torch.Tensor) -> None:
    offline = decode_offline(model, codes)
    assert offline.shape[0] == codes.shape[0] * SAMPLES_PER_FRAME
    assert 0.03 < float(offline.pow(2).mean().sqrt()) < 0.5  # speech level, not silence
    shape = StreamShape(adaptive=False)
    chunks = decode_streaming(model, codes, shape)
    spans = shape.chunks(codes.shape[0])
    assert [e - s for s, e, _ in spans][:3] == [1, 25, 25] and len(chunks) == len(spans)
    assert [final for *_, final in spans] == [False] * (len(spans) - 1) + [True]
    # 120 frames: 1 + 4 x 25 as they arrive, then the 19 left over with the tail
    assert spans[-1] == (101, 120, True)
    assert shape.chunks(26)[-1] == (26, 26, True)  # speech ended on a chunk boundary: the tail alone
    tail = model.tail_samples
    assert chunks[0].shape[0] == SAMPLES_PER_FRAME - tail  # the first playable PCM: one frame, less the delay
    stream = torch.cat(chunks)
    assert stream.shape == offline.shape
    whole_context = (shape.left_context + 1) * SAMPLES_PER_FRAME - tail
    got, ref = stream.numpy(), offline.numpy()
    assert_sqnr(ref[:whole_context], got[:whole_context], ROUNDING_SQNR_DB, "whole-context stream vs offline")
    assert_sqnr(ref, got, STREAM_SQNR_DB, "stream vs offline")
    # The adaptive schedule's chunks when it is never pressed (1, 2, 4, ... 25): the same bounds.
    adaptive = StreamShape()
    spans = adaptive.chunks(codes.shape[0])
    assert [e - s for s, e, _ in spans][:7] == [1, 2, 4, 8, 16, 25, 25]
    assert StreamShape.chunks_ending([e for _, e, _ in spans]) == spans
    got = torch.cat(decode_streaming(model, codes, adaptive)).numpy()
    assert_sqnr(ref[:whole_context], got[:whole_context], ROUNDING_SQNR_DB, "whole-context adaptive stream vs offline")
    assert_sqnr(ref, got, STREAM_SQNR_DB, "adaptive stream vs offline")
