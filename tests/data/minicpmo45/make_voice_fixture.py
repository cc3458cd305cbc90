"""Writes voice_features.npz: what Step-Audio2's voice preparation computes on the first second of
pocketsphinx-testdata's first LibriVox clip (16 kHz), from its own sources, for
tests/export/models/minicpmo45/test_minicpmo45_voice.py:

- s3_log_mel [128, 100]: `s3tokenizer.utils.log_mel_spectrogram` of minicpmo-utils 1.0.0 (the
  S3 tokenizer's input; torchaudio, used there only to read files, stubbed);
- fbank [98, 80]: kaldi-native-fbank 1.23.0 with torchaudio.compliance.kaldi.fbank's defaults
  and dither 0, as upstream calls it for CAM++ (torchaudio does not install here).

    pip download --no-deps minicpmo-utils==1.0.0 kaldi-native-fbank==1.23.0   # unpack both
    python make_voice_fixture.py MINICPMO_UTILS_SRC KALDI_NATIVE_FBANK_SITE OUT.npz
"""

from __future__ import annotations

import importlib.util
import sys
import types
from pathlib import Path

import numpy as np
import torch

CLIP = sorted(Path("/usr/share/pocketsphinx/test/data/librivox").glob("*.wav"))[0]


def main(utils_src: Path, knf_site: Path, out: Path) -> None:
    from omni_edge.runtime.media import read_wav

    samples, rate = read_wav(CLIP)
    assert rate == 16000
    x = samples[:16000].astype(np.float32)
    sys.modules["torchaudio"] = types.ModuleType("torchaudio")
    spec = importlib.util.spec_from_file_location("s3u", utils_src / "s3tokenizer" / "utils.py")
    assert spec is not None and spec.loader is not None
    utils = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(utils)
    del sys.modules["torchaudio"]
    mel = utils.log_mel_spectrogram(torch.from_numpy(x)).numpy()
    sys.path.insert(0, str(knf_site))
    import kaldi_native_fbank as knf

    opts = knf.FbankOptions()
    opts.frame_opts.dither = 0
    opts.frame_opts.snip_edges = True
    opts.mel_opts.num_bins = 80
    opts.mel_opts.low_freq = 20
    opts.mel_opts.high_freq = 0
    fbank = knf.OnlineFbank(opts)
    fbank.accept_waveform(16000, x.tolist())
    fbank.input_finished()
    frames = np.stack([fbank.get_frame(i) for i in range(fbank.num_frames_ready)]).astype(np.float32)
    np.savez_compressed(out, s3_log_mel=mel.astype(np.float32), fbank=frames)


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
