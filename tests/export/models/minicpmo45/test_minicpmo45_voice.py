"""A voice prompt from a recording (voice.py): the S3 tokenizer's log-mel and CAM++'s Kaldi
filterbank against what upstream's own code computes (voice_features.npz, make_voice_fixture.py),
and the export's path through the release's two voice models. Those models cannot be downloaded
here: two ONNX graphs stand in for them, taking and giving what upstream feeds and reads
(feats [1, 128, T] and feats_length [1] int32 -> codes [1, T / 4]; fbank [1, T, 80] -> [1, 192])."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch
from omni_edge.export.comparison import sqnr_db
from paths import DATA

FEATURES = DATA / "minicpmo45" / "voice_features.npz"
LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")


def _clip() -> np.ndarray:
    from omni_edge.runtime.media import read_wav

    return read_wav(sorted(LIBRIVOX.glob("*.wav"))[0])[0]


def test_the_voice_features_equal_upstreams() -> None:
    from omni_edge.export.models.minicpmo45.voice import kaldi_fbank, s3_log_mel

    expected = np.load(FEATURES)
    x = _clip()[:16000]
    assert sqnr_db(expected["s3_log_mel"], s3_log_mel(x)) > 120  # measured 151
    assert sqnr_db(expected["fbank"], kaldi_fbank(x)) > 100      # measured 117 (kaldi-native-fbank)


class _Tokenizer(torch.nn.Module):
    """Codes at 25 Hz from 100 Hz features: each 4 frames' mean through a projection, argmax."""

    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(128, 6561)

    def forward(self, feats: torch.Tensor, feats_length: torch.Tensor) -> torch.Tensor:
        n = feats.shape[2] // 4
        pooled = feats[:, :, : 4 * n].reshape(1, 128, n, 4).mean(dim=3).transpose(1, 2)
        codes = torch.argmax(self.proj(pooled), dim=-1).to(torch.int32)
        return codes + 0 * feats_length  # the length is an input of the real model: kept in the graph


class _Speaker(torch.nn.Module):
    def __init__(self) -> None:
        super().__init__()
        self.proj = torch.nn.Linear(80, 192)

    def forward(self, fbank: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.proj(fbank.mean(dim=1))
        return out


def test_an_export_takes_codes_and_speaker_from_the_releases_voice_models(tmp_path: Path) -> None:
    from omni_edge.export.models.minicpmo45.checkpoint import TOKEN2WAV
    from omni_edge.export.models.minicpmo45.flow import random_flow
    from omni_edge.export.models.minicpmo45.token2wav_export import load_voice
    from omni_edge.export.models.minicpmo45.voice import SPEAKER, TOKENIZER, kaldi_fbank, s3_log_mel
    from omni_edge.runtime.media import wav_bytes

    torch.manual_seed(0)
    tokenizer, speaker = _Tokenizer().eval(), _Speaker().eval()
    directory = tmp_path / "ck" / "assets" / "token2wav"
    directory.mkdir(parents=True)
    with torch.no_grad():
        torch.onnx.export(tokenizer, (torch.zeros(1, 128, 40), torch.tensor([40], dtype=torch.int32)),
                          str(directory / TOKENIZER), input_names=["feats", "feats_length"], output_names=["codes"],
                          dynamic_axes={"feats": {2: "t"}, "codes": {1: "n"}}, dynamo=False)
        torch.onnx.export(speaker, (torch.zeros(1, 40, 80),), str(directory / SPEAKER), input_names=["input"],
                          output_names=["embedding"], dynamic_axes={"input": {1: "t"}}, dynamo=False)
    x = _clip()[:32000]
    wav = tmp_path / "voice.wav"
    wav.write_bytes(wav_bytes(x, 16000))
    flow = random_flow(TOKEN2WAV["tiny"][0])
    voice, meta = load_voice(flow, wav, tmp_path / "ck")
    with torch.no_grad():
        codes = tokenizer(torch.from_numpy(s3_log_mel(x))[None], torch.tensor([0]))
        fbank = torch.from_numpy(kaldi_fbank(x))
        spk = speaker((fbank - fbank.mean(dim=0, keepdim=True))[None])
    assert torch.equal(voice.tokens, codes.long()) and voice.tokens.shape == (1, 50)  # 2 s at 25 Hz
    assert torch.allclose(voice.speaker, spk, atol=1e-5)
    assert voice.mel.shape == (1, 100, 80)  # 2 frames per code
    assert "campplus.onnx" in meta["codes_and_speaker"] and meta["source"] == "voice.wav"
    with pytest.raises(ValueError, match="at most 30 s"):
        long = tmp_path / "long.wav"
        long.write_bytes(wav_bytes(np.tile(x, 16), 16000))
        load_voice(flow, long, tmp_path / "ck")
