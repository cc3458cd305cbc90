"""A Qwen3-TTS release's speech tokenizer (the 12 Hz codec decoder) as the vocoder: its weights load
as the release names them, the decoder equals the release's implementation (qwen-tts) on the
fixture it wrote, and it streams through export and the native chain."""

from __future__ import annotations

import json
import shutil
from pathlib import Path

import pytest
import torch
from numeric import assert_sqnr, sqnr_db
from omni_edge.export.models.qwen3_tts.reference import SAMPLES_PER_FRAME, VOCODER_DIR, Qwen3Tts, decode_offline
from omni_edge.export.options import TtsExportOptions
from omni_edge.export.registry import export_checkpoint
from omni_edge.export.speech import StreamShape
from omni_edge.runtime import SpeechSession
from paths import DATA
from safetensors.torch import load_file, save_file

FIXTURE = DATA / "qwen3_tts_12hz"
# The fixture was written on another CPU (by qwen-tts, fp32), and fp32 convolutions round
# differently across SIMD paths: measured equal (max difference 0.0) on the CPU that wrote it,
# 99-100 dB on an AMD EPYC at every torch ISA level (default, AVX2, AVX-512). One weight off by
# 1e-4 of itself measures 67 dB (the negative control below).
FIXTURE_SQNR_DB = 85.0


@pytest.fixture(scope="module")
def release_vocoder_checkpoint(tts_checkpoint: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The tiny talker with the fixture's speech tokenizer, whose weights file also holds an
    encoder (as a release's does)."""
    out = tmp_path_factory.mktemp("release-vocoder") / "qwen3-tts-12hz"
    shutil.copytree(tts_checkpoint, out)
    shutil.copy2(FIXTURE / "config.json", out / VOCODER_DIR / "config.json")
    weights = load_file(str(FIXTURE / "model.safetensors"))
    weights["encoder.encoder.layers.0.conv.weight"] = torch.zeros(4, 1, 7)
    save_file(weights, str(out / VOCODER_DIR / "model.safetensors"))
    return out


@pytest.mark.host_numerics
def test_decoder_equals_the_release_implementation(release_vocoder_checkpoint: Path) -> None:
    model = Qwen3Tts.from_pretrained(release_vocoder_checkpoint)
    ref = load_file(str(FIXTURE / "reference.safetensors"))
    with torch.no_grad():
        wav = model.vocoder(ref["codes"])
        wav12 = model.vocoder(ref["codes"][..., :12])
    assert wav.shape == ref["wav"].shape == (1, 1, 30 * SAMPLES_PER_FRAME)
    assert_sqnr(ref["wav"], wav, FIXTURE_SQNR_DB, "30 frames")
    assert_sqnr(ref["wav12"], wav12, FIXTURE_SQNR_DB, "12 frames")
    assert 0.1 < float(ref["wav"].std()) < 0.5  # speech level, not silence or clipping
    # Causal without a tail: the first 12 frames' samples are final once those frames are decoded.
    assert model.tail_samples == 0
    assert_sqnr(wav[..., :12 * SAMPLES_PER_FRAME], wav12, FIXTURE_SQNR_DB, "12 frames within 30")


@pytest.mark.host_numerics
def test_a_decoder_one_weight_off_fails_that_limit(release_vocoder_checkpoint: Path) -> None:
    """The negative control of the test above: one weight of the decoder off by 1e-4 of itself
    (measured 67 dB) is below the fixture limit."""
    model = Qwen3Tts.from_pretrained(release_vocoder_checkpoint)
    ref = load_file(str(FIXTURE / "reference.safetensors"))
    weight = dict(model.vocoder.named_parameters())["decoder.1.block.2.conv2.conv.weight"]
    with torch.no_grad():
        weight.mul_(1 + 1e-4)
        wav = model.vocoder(ref["codes"])
    assert sqnr_db(ref["wav"].numpy(), wav.numpy()) < FIXTURE_SQNR_DB


def test_release_vocoder_streams_through_export_and_the_native_chain(release_vocoder_checkpoint: Path,
                                                                     tmp_path: Path) -> None:
    opts = TtsExportOptions(prefill_chunk=16, buckets=(128,), validation_frames=24,
                            stream=StreamShape(first=1, chunk=5, left_context=24, adaptive=False))
    [(component, got)] = export_checkpoint(release_vocoder_checkpoint, tmp_path, opts)
    assert got["codes_agree_to_near_tie"] == 1.0 and got["pcm_sqnr_db"] >= 80.0, got  # ONNX graphs vs PyTorch
    plan = json.loads((tmp_path / "plan.json").read_text())
    assert plan["stages"][1]["vocoder"]["tail_samples"] == 0
    session = SpeechSession.open(tmp_path / "plan.json")
    utterance = session.speak("Hello from the speech pipeline.", max_frames=30, prebuffer_ms=0)
    codes = torch.tensor(session.codes())
    assert utterance.pcm.shape[0] == codes.shape[0] * SAMPLES_PER_FRAME and codes.shape[0] > 10
    offline = decode_offline(Qwen3Tts.from_pretrained(release_vocoder_checkpoint), codes).numpy()
    # Chunks of 5 frames with 24 frames of left context against one offline decode: the fixture's
    # two transformer layers with 8-frame windows reach 16 frames back, so the context covers them
    # and the convolutions' reach (measured 99 dB, max 1.4e-5).
    assert_sqnr(offline, utterance.pcm, 80.0, "native stream vs offline")
    assert component.name == "speech-onnx"


def test_a_foreign_speech_tokenizer_is_refused(release_vocoder_checkpoint: Path, tmp_path: Path) -> None:
    bad = tmp_path / "bad"
    shutil.copytree(release_vocoder_checkpoint, bad)
    weights = load_file(str(bad / VOCODER_DIR / "model.safetensors"))
    weights["quantizer.extra"] = torch.zeros(1)
    save_file(weights, str(bad / VOCODER_DIR / "model.safetensors"))
    with pytest.raises(ValueError, match=r"unexpected.*quantizer\.extra"):
        Qwen3Tts.from_pretrained(bad)
    config = json.loads((FIXTURE / "config.json").read_text())
    config["decoder_config"]["codebook_size"] = 128
    (bad / VOCODER_DIR / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="codebook_size"):
        Qwen3Tts.from_pretrained(bad)
    del config["decoder_config"]["latent_dim"]
    (bad / VOCODER_DIR / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match="latent_dim"):
        Qwen3Tts.from_pretrained(bad)
    (bad / VOCODER_DIR / "config.json").write_text(json.dumps({**config, "model_type": "qwen3_tts_tokenizer_25hz"}))
    with pytest.raises(ValueError, match="not supported"):
        Qwen3Tts.from_pretrained(bad)
