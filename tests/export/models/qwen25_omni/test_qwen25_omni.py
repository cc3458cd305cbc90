"""Qwen2.5-Omni thinker checkpoints: the local ones are the architecture transformers builds,
with the config's special token ids; the loader takes a thinker-only directory and a whole
release the same way; the reference request (image and audio placeholders, ChatML) is what
transformers' own processors and generate make of it."""

from __future__ import annotations

import json
import subprocess
import wave
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from llm_reference import CLI, cli
from omni_edge.export.models.qwen25_omni.reference import (
    MEDIA_TOKENS,
    audio_tokens,
    checkpoint_kind,
    load_thinker,
    processors,
    reference_generate,
    reference_inputs,
    render_ids,
)
from safetensors.torch import load_file, save_file


@pytest.fixture(scope="session")
def media(tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """A 448x448 red square (no resampling: 32x32 patches, 256 tokens), a 300x200 gradient
    (resized up to multiples of 28), 333x251 noise, a 1600x1200 noise image (above max_pixels:
    reduced, with the filter widened), a real photograph (matplotlib's sample grace_hopper.jpg,
    512x600), a 2 s 440 Hz tone at 16, 24 and 44.1 kHz and a 3.3 s stereo chirp at 44.1 kHz."""
    import matplotlib
    from PIL import Image

    d = tmp_path_factory.mktemp("media")
    Image.new("RGB", (448, 448), (255, 0, 0)).save(d / "red_square_448.png")
    ramp = np.linspace(0, 255, 300, dtype=np.uint8)
    Image.fromarray(np.stack([np.tile(ramp, (200, 1))] * 3, axis=-1)).save(d / "gradient_300x200.png")
    rng = np.random.default_rng(0)
    for w, h in ((333, 251), (1600, 1200)):
        Image.fromarray(rng.integers(0, 256, (h, w, 3), dtype=np.uint8)).save(d / f"noise_{w}x{h}.png")
    for rate in (16000, 24000, 44100):
        t = np.arange(2 * rate) / rate
        with wave.open(str(d / f"tone_440hz_2s_{rate}.wav"), "wb") as w:
            w.setnchannels(1)
            w.setsampwidth(2)
            w.setframerate(rate)
            w.writeframes((0.5 * np.sin(2 * np.pi * 440 * t) * 32767).astype(np.int16).tobytes())
    # 3.3 s of a chirp in stereo at 44.1 kHz (two encoder chunks, the last shorter; channels averaged).
    t = np.arange(int(3.3 * 44100)) / 44100
    chirp = 0.6 * np.sin(2 * np.pi * (200 + 1500 * t) * t)
    with wave.open(str(d / "chirp_stereo_44100.wav"), "wb") as w:
        w.setnchannels(2)
        w.setsampwidth(2)
        w.setframerate(44100)
        w.writeframes((np.stack([chirp, 0.5 * chirp], axis=1) * 32767).astype(np.int16).tobytes())
    return {"red": d / "red_square_448.png", "gradient": d / "gradient_300x200.png",
            "noise": d / "noise_333x251.png", "large": d / "noise_1600x1200.png",
            "photo": Path(matplotlib.get_data_path()) / "sample_data" / "grace_hopper.jpg",
            "tone16": d / "tone_440hz_2s_16000.wav", "tone24": d / "tone_440hz_2s_24000.wav",
            "tone44": d / "tone_440hz_2s_44100.wav", "chirp": d / "chirp_stereo_44100.wav"}


def test_the_checkpoint_is_transformers_thinker_with_its_tokenizers_ids(omni_checkpoint: Path) -> None:
    from transformers import AutoTokenizer

    config = json.loads((omni_checkpoint / "config.json").read_text())
    assert config["model_type"] == "qwen2_5_omni_thinker" and checkpoint_kind(omni_checkpoint) == "qwen2_5_omni_thinker"
    tokenizer = AutoTokenizer.from_pretrained(omni_checkpoint)
    thinker = load_thinker(omni_checkpoint)
    c = thinker.config
    assert tokenizer.convert_tokens_to_ids(MEDIA_TOKENS["image_token"]) == c.image_token_index
    assert tokenizer.convert_tokens_to_ids(MEDIA_TOKENS["audio_token"]) == c.audio_token_index
    assert tokenizer.convert_tokens_to_ids(MEDIA_TOKENS["vision_bos_token"]) == c.vision_start_token_id
    assert tokenizer.convert_tokens_to_ids(MEDIA_TOKENS["audio_eos_token"]) == c.audio_end_token_id
    assert c.text_config.vocab_size == len(tokenizer) and thinker.skipped == {}
    rope = c.text_config.rope_parameters
    assert 2 * sum(rope["mrope_section"]) == c.text_config.hidden_size // c.text_config.num_attention_heads


def test_the_processors_count_the_tokens_the_thinker_expects(omni_checkpoint: Path, media: dict[str, Path]) -> None:
    proc = processors(omni_checkpoint)
    thinker = load_thinker(omni_checkpoint)
    inputs = reference_inputs(omni_checkpoint, thinker, [("image", media["red"]), ("audio", media["tone16"]),
                                                         ("image", media["gradient"])], "Describe.", chat=False)
    ids = inputs["input_ids"][0].tolist()
    grid = inputs["image_grid_thw"].tolist()
    assert grid[0] == [1, 32, 32] and all(h % 2 == 0 and w % 2 == 0 for _, h, w in grid)
    image_tokens = sum(t * h * w for t, h, w in grid) // proc.merge_size ** 2
    assert ids.count(thinker.config.image_token_index) == image_tokens and grid[0][1] * grid[0][2] // 4 == 256
    assert ids.count(thinker.config.audio_token_index) == 50 == audio_tokens(200)  # 25 tokens per second
    # 44.1 kHz audio is resampled to the extractor's 16 kHz first: the same token count.
    again = reference_inputs(omni_checkpoint, thinker, [("audio", media["tone44"])], "x", chat=False)
    assert again["input_ids"][0].tolist().count(thinker.config.audio_token_index) == 50


def test_chat_renders_the_user_turn_as_qwen25_omni_chatml(omni_checkpoint: Path) -> None:
    from transformers import AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(omni_checkpoint)
    c = load_thinker(omni_checkpoint).config
    ids = render_ids(tokenizer, c, [("audio", 2), ("image", 1)], "Hi", chat=True)
    expected = ("<|im_start|>user\n<|audio_bos|><|AUDIO|><|AUDIO|><|audio_eos|><|vision_bos|><|IMAGE|><|vision_eos|>"
                "Hi<|im_end|>\n<|im_start|>assistant\n")
    assert tokenizer.decode(ids) == expected
    with_system = render_ids(tokenizer, c, [], "Hi", chat=True, system="Be brief.")
    assert tokenizer.decode(with_system).startswith("<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\n")
    assert tokenizer.decode(render_ids(tokenizer, c, [("image", 1)], "Hi", chat=False)) == \
        "<|vision_bos|><|IMAGE|><|vision_eos|>Hi"


def test_a_release_directory_loads_the_same_thinker(omni_checkpoint: Path, media: dict[str, Path],
                                                    tmp_path: Path) -> None:
    """A Qwen2.5-Omni release's layout: the whole config (thinker_config inside), the thinker's
    weights under `thinker.` beside a talker's and a token2wav's, which are skipped and counted."""
    from transformers import Qwen2_5OmniConfig

    thinker_config = json.loads((omni_checkpoint / "config.json").read_text())
    release = tmp_path / "release"
    release.mkdir()
    for name in ("tokenizer.json", "tokenizer_config.json", "preprocessor_config.json"):
        (release / name).write_bytes((omni_checkpoint / name).read_bytes())
    config = Qwen2_5OmniConfig(thinker_config=thinker_config, enable_audio_output=False).to_dict()
    (release / "config.json").write_text(json.dumps(config))
    weights = {f"thinker.{k}": v for k, v in load_file(str(omni_checkpoint / "model.safetensors")).items()}
    weights |= {"talker.model.embed_tokens.weight": torch.zeros(4, 4), "token2wav.code_embed.weight": torch.zeros(2, 2)}
    items = list(weights.items())
    shards = {"model-00001-of-00002.safetensors": dict(items[: len(items) // 2]),
              "model-00002-of-00002.safetensors": dict(items[len(items) // 2:])}
    for name, part in shards.items():
        save_file(part, str(release / name))
    index = {"metadata": {}, "weight_map": {k: name for name, part in shards.items() for k in part}}
    (release / "model.safetensors.index.json").write_text(json.dumps(index))
    loaded = load_thinker(release)
    assert checkpoint_kind(release) == "qwen2_5_omni" and loaded.skipped == {"talker": 1, "token2wav": 1}
    request = ([("image", media["red"]), ("audio", media["tone16"])], "What is this?")
    ours = reference_generate(omni_checkpoint, load_thinker(omni_checkpoint), *request, max_new_tokens=6, chat=True)
    assert reference_generate(release, loaded, *request, max_new_tokens=6, chat=True) == ours


def test_other_checkpoints_are_refused_with_the_reason(tiny_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"not a Qwen2\.5-Omni thinker"):
        checkpoint_kind(tiny_checkpoint)
    with pytest.raises(ValueError, match=r"no config\.json"):
        checkpoint_kind(tmp_path)
    bad = cli("make-checkpoint", "--arch", "qwen2.5-omni", "--preset", "bench", "--out", str(tmp_path / "x"))
    assert bad.returncode == 2 and "unknown preset 'bench' for qwen2.5-omni" in bad.stderr


@pytest.mark.parametrize("name", ["red", "gradient", "noise", "large", "photo"])
def test_native_image_preprocessing_is_the_reference_processors_to_the_bit(omni_checkpoint: Path,
                                                                          media: dict[str, Path], name: str) -> None:
    """The controller's smart_resize, Pillow-exact bicubic resampling, rescale, normalize and
    patch order against Qwen2VLImageProcessorPil on images that need no resampling, that are
    enlarged, reduced (max_pixels), noisy, and on a real photograph."""
    from omni_edge.runtime.media import preprocess_image
    from PIL import Image

    image = Image.open(media[name]).convert("RGB")
    ref = processors(omni_checkpoint).image(images=[image], return_tensors="np")
    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    got, grid = preprocess_image(np.asarray(image), config)
    assert grid == tuple(int(v) for v in ref["image_grid_thw"][0])
    assert got.shape == ref["pixel_values"].shape and got.dtype == ref["pixel_values"].dtype
    np.testing.assert_array_equal(got, ref["pixel_values"])


def test_native_image_preprocessing_refuses_what_it_cannot_read(omni_checkpoint: Path) -> None:
    from omni_edge.runtime.media import preprocess_image

    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    with pytest.raises(ValueError, match="aspect ratio"):
        preprocess_image(np.zeros((1, 300, 3), np.uint8), config)
    with pytest.raises(ValueError, match="image_std"):
        preprocess_image(np.zeros((56, 56, 3), np.uint8), {**config, "image_std": [1, 0, 1]})
    with pytest.raises(ValueError, match="min_pixels"):
        preprocess_image(np.zeros((56, 56, 3), np.uint8), {**config, "max_pixels": 1 << 40})
    with pytest.raises(ValueError, match="RGB"):
        preprocess_image(np.zeros((56, 56), np.uint8), config)


def test_native_mrope_positions_are_get_rope_index(omni_checkpoint: Path, media: dict[str, Path]) -> None:
    """The three position rows of an image + audio + image chat prompt, and where generation
    continues, against transformers' get_rope_index on the same ids and grids."""
    from omni_edge.runtime.media import mrope_positions

    thinker = load_thinker(omni_checkpoint)
    items = [("image", media["red"]), ("audio", media["tone16"]), ("image", media["gradient"])]
    inputs = reference_inputs(omni_checkpoint, thinker, items, "Compare them.", chat=True)
    audio_seqlens = inputs["feature_attention_mask"].sum(-1)
    ref, delta = thinker.model.model.get_rope_index(inputs["input_ids"], inputs["image_grid_thw"], None,
                                                     inputs["attention_mask"], False, audio_seqlens)
    config = json.loads((omni_checkpoint / "config.json").read_text())
    grids = [tuple(int(v) for v in g) for g in inputs["image_grid_thw"]]
    rows, next_position = mrope_positions(inputs["input_ids"][0].tolist(), config, grids)
    np.testing.assert_array_equal(rows, ref[:, 0].numpy())
    assert next_position == int(ref.max()) + 1 == inputs["input_ids"].shape[1] + int(delta[0])
    assert (rows[0] != rows[1]).any() and (rows[1] != rows[2]).any()  # images: not plain text positions
    with pytest.raises(ValueError, match="fewer image placeholder runs"):
        mrope_positions([1, 2, 3], config, grids)
    with pytest.raises(ValueError, match="needs 256 consecutive"):
        mrope_positions([thinker.config.image_token_index] * 10, config, grids[:1])


def _checks(component: Path, report: str) -> dict[str, float]:
    return {c["name"]: c["observed"] for c in json.loads((component / "reports" / report).read_text())["checks"]}


def test_export_writes_thinker_vision_and_audio_components_checked_against_transformers(omni_artifact: Path) -> None:
    """Each encoder graph against the transformers module (vision on the 448x448 grid; audio over
    2.6 chunks, the last one shorter), the thinker as any LLM through the native engine, and a
    whole image + audio chat request: encoders, splice, M-RoPE rows, 16 greedy ids equal to generate."""
    for component in ("thinker-onnx", "vision-onnx", "audio-onnx", "thinker-pte", "vision-pte", "audio-pte"):
        assert cli("verify", str(omni_artifact / component)).returncode == 0, component
    # ExecuTorch: each encoder method against transformers, and the whole request on ExecuTorch.
    assert _checks(omni_artifact / "vision-pte", "numerical.json")["embeds_sqnr_db"] >= 100  # measured 121.6 dB
    assert _checks(omni_artifact / "audio-pte", "numerical.json")["embeds_sqnr_db"] >= 100   # measured 137.3 dB
    assert _checks(omni_artifact / "thinker-pte", "task.json")["media_greedy_agreement"] == 1.0
    assert _checks(omni_artifact / "vision-onnx", "numerical.json")["embeds_sqnr_db"] >= 100  # measured 122 dB
    assert _checks(omni_artifact / "audio-onnx", "numerical.json")["embeds_sqnr_db"] >= 100   # measured 140 dB
    thinker = _checks(omni_artifact / "thinker-onnx", "numerical.json")
    task = _checks(omni_artifact / "thinker-onnx", "task.json")
    assert thinker["logit_sqnr_db"] >= 100 and thinker["top1_agreement"] == 1.0 and task["greedy_agreement_64"] == 1.0
    assert task["media_greedy_agreement"] == 1.0 and task["media_prompt_tokens"] > 256 + 50
    plan = json.loads((omni_artifact / "plan.json").read_text())
    assert [s["model_stage"] for s in plan["stages"]] == ["vision_encoder", "audio_encoder", "thinker"]
    assert plan["stages"][2]["input_sources"] == [0, 1] and plan["stages"][2]["llm"]["position_rows"] == 3
    # Each format's plan is the whole pipeline in that format; the thinker alone is named so.
    for fmt in ("onnx", "pte"):
        stages = json.loads((omni_artifact / f"plan.{fmt}.json").read_text())["stages"]
        assert [(s["model_stage"], s["artifact"]) for s in stages] == [
            ("vision_encoder", f"vision-{fmt}"), ("audio_encoder", f"audio-{fmt}"), ("thinker", f"thinker-{fmt}")], fmt
        alone = json.loads((omni_artifact / f"plan.thinker-{fmt}.json").read_text())["stages"]
        assert [s["artifact"] for s in alone] == [f"thinker-{fmt}"]
    manifest = json.loads((omni_artifact / "thinker-onnx" / "manifest.json").read_text())
    assert manifest["metadata"]["omni"]["image_grids"] == [[1, 32, 32]]


def test_the_spliced_request_needs_its_media_and_takes_native_preprocessing(omni_checkpoint: Path, omni_artifact: Path,
                                                                            media: dict[str, Path]) -> None:
    """The chain with the image and the audio (3.3 s stereo at 44.1 kHz: two chunks) preprocessed
    natively, as a device would, speaks transformers' ids; without the encoders' rows it does not."""
    from omni_edge import _native
    from omni_edge.export.models.qwen25_omni.validation import Encoders, media_generate
    from omni_edge.runtime.media import audio_features, preprocess_image
    from PIL import Image

    thinker = load_thinker(omni_checkpoint)
    items = [("audio", media["chirp"]), ("image", media["red"])]
    inputs = reference_inputs(omni_checkpoint, thinker, items, "What is this?", chat=True)
    with torch.no_grad():
        ref = thinker.model.generate(**inputs, max_new_tokens=12, min_new_tokens=12, do_sample=False)
    ref_ids = ref[0, inputs["input_ids"].shape[1]:].tolist()
    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    pixels, grid = preprocess_image(np.asarray(Image.open(media["red"]).convert("RGB")), config)
    features = audio_features(media["chirp"].read_bytes(), config)
    padded = np.zeros((1, features.shape[0], 3000), np.float32)
    padded[0, :, :features.shape[1]] = features
    mask = (np.arange(3000) < features.shape[1]).astype(np.int64)[None]
    native = {**inputs, "pixel_values": torch.from_numpy(pixels.copy()), "image_grid_thw": torch.tensor([grid]),
              "input_features": torch.from_numpy(padded), "feature_attention_mask": torch.from_numpy(mask)}
    plan = omni_artifact / "plan.thinker-onnx.json"  # the thinker alone
    assert media_generate(omni_checkpoint, thinker, plan, Encoders.of(omni_artifact), native, 12)[0] == ref_ids
    engine = _native.LlmEngine.open(str(plan))
    logits = np.frombuffer(engine.feed(inputs["input_ids"][0].tolist()), np.float32)  # placeholders' own embeddings
    plain = []
    for _ in range(12):
        plain.append(int(np.argmax(logits)))
        logits = np.frombuffer(engine.feed([plain[-1]]), np.float32)
    assert plain != ref_ids
    engine.set_position_table([[0], [0], [0]], 1)  # after tokens: a continued conversation's next rows
    with pytest.raises(ValueError, match="outside"):
        engine.set_position_table([[5], [5], [5]], 1)
    engine.reset()
    with pytest.raises(ValueError, match="3 rows"):
        engine.set_position_table([[0, 1]], 2)
    with pytest.raises(ValueError, match="hidden_size"):
        engine.feed([1, 2], b"\0" * 7, [0])


LOG_MEL_TOLERANCE = 2e-4  # |native - WhisperFeatureExtractor| (float64 STFT vs its float32 torch STFT; measured <= 5.2e-5)


@pytest.mark.parametrize("name", ["tone16", "tone24", "tone44", "chirp"])
def test_native_audio_features_are_the_reference_extractors(omni_checkpoint: Path, media: dict[str, Path],
                                                            name: str) -> None:
    """WAV decode (bit for bit as the reference reads it), resampling to 16 kHz (scipy's
    resample_poly to float rounding) and the log-mel spectrogram (WhisperFeatureExtractor within
    LOG_MEL_TOLERANCE), over the audio's frames."""
    from omni_edge.export.models.qwen25_omni.reference import resample
    from omni_edge.runtime.media import audio_features, decode_wav, read_wav
    from omni_edge.runtime.media import resample as native_resample

    wav = media[name].read_bytes()
    ref_x, rate = read_wav(media[name])
    got_x, got_rate = decode_wav(wav)
    assert got_rate == rate and np.array_equal(got_x, ref_x)
    ref_16k = resample(ref_x, rate, 16000)
    got_16k = native_resample(got_x, rate, 16000)
    assert got_16k.shape == ref_16k.shape and float(np.abs(got_16k - ref_16k).max()) <= 1e-6
    ref = processors(omni_checkpoint).audio([ref_16k], sampling_rate=16000, return_attention_mask=True,
                                            padding="max_length", return_tensors="np")
    frames = int(ref["attention_mask"].sum())
    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    got = audio_features(wav, config)
    assert got.shape == (128, frames)
    assert float(np.abs(got - ref["input_features"][0, :, :frames]).max()) <= LOG_MEL_TOLERANCE


def test_native_audio_features_take_a_releases_window(omni_checkpoint: Path, media: dict[str, Path]) -> None:
    """The real Qwen2.5-Omni and Qwen3-Omni releases pad to 300 s (n_samples 4,800,000; the
    project's checkpoints write the same): the native front end takes any window up to an hour and
    computes only the audio's own frames, equal to WhisperFeatureExtractor's with those settings."""
    from omni_edge.runtime.media import audio_features, read_wav
    from transformers import WhisperFeatureExtractor

    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    assert (config["chunk_length"], config["n_samples"], config["nb_max_frames"]) == (300, 4_800_000, 30_000)
    wav, (x, _) = media["tone16"].read_bytes(), read_wav(media["tone16"])
    got = {}
    for window in (30, 300, 3600):
        settings = {**config, "chunk_length": window, "n_samples": window * 16000, "nb_max_frames": window * 100}
        got[window] = audio_features(wav, settings)
        assert got[window].shape == (128, 200), window  # 2 s: the audio's own frames, whatever the window
        if window == 3600:  # the reference would pad to an hour (57.6 M samples); the padding changes nothing
            assert np.array_equal(got[window], got[300])
            continue
        extractor = WhisperFeatureExtractor(**{k: settings[k] for k in ("feature_size", "sampling_rate", "hop_length",
                                                                        "chunk_length", "n_fft")})
        ref = extractor([x], sampling_rate=16000, return_attention_mask=True, padding="max_length", return_tensors="np")
        assert int(ref["attention_mask"].sum()) == 200
        assert float(np.abs(got[window] - ref["input_features"][0, :, :200]).max()) <= LOG_MEL_TOLERANCE, window
    with pytest.raises(ValueError, match=r"n_samples: must be in \[n_fft, 3600 s of samples\]"):
        audio_features(media["tone16"].read_bytes(), {**config, "n_samples": 3601 * 16000})


def test_native_audio_front_end_refuses_what_it_cannot_read(omni_checkpoint: Path, media: dict[str, Path]) -> None:
    from omni_edge.runtime.media import audio_features

    config = json.loads((omni_checkpoint / "preprocessor_config.json").read_text())
    with pytest.raises(ValueError, match="not a WAV"):
        audio_features(b"ID3 an mp3", config)
    with pytest.raises(ValueError, match="n_fft"):
        audio_features(media["tone16"].read_bytes(), {**config, "n_fft": 401})
    truncated = media["tone16"].read_bytes()[:40]
    with pytest.raises(ValueError, match=r"no data|truncated"):
        audio_features(truncated, config)


def _generate(checkpoint: Path, items: list[tuple[str, Path]], prompt: str, n: int) -> list[int]:
    thinker = load_thinker(checkpoint)
    inputs = reference_inputs(checkpoint, thinker, items, prompt, chat=True)
    with torch.no_grad():
        out = thinker.model.generate(**inputs, max_new_tokens=n, min_new_tokens=n, do_sample=False)
    return [int(t) for t in out[0, inputs["input_ids"].shape[1]:]]


def _streamed_ids(stdout: str) -> tuple[list[int], dict[str, Any]]:
    events = [json.loads(line) for line in stdout.splitlines() if line.startswith("{")]
    return [t for e in events for t in e.get("token_ids", [])], events[-1]


def test_run_with_an_image_and_audio_streams_generates_ids_natively(omni_checkpoint: Path, omni_artifact: Path,
                                                                      media: dict[str, Path]) -> None:
    """The multimodal plan (image and audio encoder stages feeding the thinker) on both CLIs:
    media decoded and preprocessed on the device, encoded, spliced; greedy ids equal generate's."""
    items = [("image", media["red"]), ("audio", media["chirp"])]
    ref = _generate(omni_checkpoint, items, "What is this?", 12)
    flags = ["--plan", str(omni_artifact / "plan.json"), "--image", str(media["red"]), "--audio", str(media["chirp"]),
             "--prompt", "What is this?", "--chat", "--max-new-tokens", "12", "--ignore-stop-tokens", "--json"]
    python = cli("run", *flags)
    assert python.returncode == 0, python.stderr[-2000:]
    ids, done = _streamed_ids(python.stdout)
    assert ids == ref and done["media"]["items"] == 2 and done["media"]["tokens"] == 256 + audio_tokens(330)
    native = subprocess.run([str(CLI.parent / "omni-edge-run"), "run", *flags], capture_output=True, text=True, timeout=300)
    assert native.returncode == 0, native.stderr[-2000:]
    assert _streamed_ids(native.stdout)[0] == ref
    # Encoders in series (image -> audio, which passes the image's rows on -> thinker): the same ids.
    plan = json.loads((omni_artifact / "plan.json").read_text())
    plan["stages"][1]["input_sources"], plan["stages"][2]["input_sources"] = [0], [1]
    serial = omni_artifact / "plan.serial.json"
    serial.write_text(json.dumps(plan))
    chained = cli("run", *flags[:1], str(serial), *flags[2:])
    assert chained.returncode == 0 and _streamed_ids(chained.stdout)[0] == ref, chained.stderr[-2000:]
    # The same plan answers text alone.
    text = cli("run", "--plan", str(omni_artifact / "plan.json"), "--prompt", "Hello", "--chat", "--max-new-tokens", "8",
               "--ignore-stop-tokens", "--json")
    assert text.returncode == 0 and _streamed_ids(text.stdout)[0] == _generate(omni_checkpoint, [], "Hello", 8)


def test_media_a_plan_cannot_read_are_clear_errors(omni_artifact: Path, media: dict[str, Path], tmp_path: Path) -> None:
    from omni_edge.contracts import ContractError
    from omni_edge.runtime import Session

    session = Session.open(omni_artifact / "plan.json")
    bad = tmp_path / "not_an_image.png"
    bad.write_bytes(b"\x89PNG but not really")
    short = tmp_path / "short.wav"  # 100 samples: 1 frame, and the encoder needs 3 for one token
    with wave.open(str(short), "wb") as w:
        w.setnchannels(1)
        w.setsampwidth(2)
        w.setframerate(16000)
        w.writeframes(b"\1\0" * 100)
    cases = [([("image", media["gradient"])], "patch grid 1x14x22"),  # a size the export did not compile
             ([("image", bad)], "not an image"), ([("audio", media["red"])], "not a WAV"),
             ([("audio", short)], r"too short: 1 frame\(s\) give no audio token; it must hold at least 321 samples at 16000 Hz")]
    for items, message in cases:
        with pytest.raises(ContractError, match=message):
            session.run("x", media=items, on_event=lambda e: True)
    assert session.run("x", media=[("image", media["red"])], max_new_tokens=2, on_event=lambda e: True)["n_generated_tokens"] >= 1
    # Plans: the preprocessor must be a hashed file of the encoder's artifact, read only after
    # verification, and make rows of the width the plan declares.
    for key, value, message in (("preprocessor", "../thinker-onnx/config.json", "not hashed"),
                                ("input_width", 17, "input_width is 17")):
        plan = json.loads((omni_artifact / "plan.json").read_text())
        plan["stages"][0]["encoder"][key] = value
        bad_plan = tmp_path / f"bad_{key}.json"
        bad_plan.write_text(json.dumps({**plan, "stages": [{**s, "artifact": str(omni_artifact / s["artifact"])}
                                                           for s in plan["stages"]]}))
        with pytest.raises(ContractError, match=message):
            Session.open(bad_plan)
    text_only = Session.open(omni_artifact / "plan.thinker-onnx.json")
    with pytest.raises(ContractError, match="no media encoders"):
        text_only.run("x", media=[("image", media["red"])], on_event=lambda e: True)


def test_encoders_compile_for_the_htp_and_run_there(omni_checkpoint: Path, media: dict[str, Path], tmp_path: Path) -> None:
    """--target qnn-htp: both encoders compiled at fp16 for the SM8750 HTP (CPU fallback disabled),
    checked on the emulator against their fp32 graphs and through a whole request; the native
    session reports them on the QNN EP and the thinker on the CPU. At w8a16 the HTP refuses the
    vision merger's exact GELU (Erf), and the export names it."""
    out = tmp_path / "qnn"
    done = cli("export", "llm", "--checkpoint", str(omni_checkpoint), "--out", str(out), "--buckets", "512",
               "--prefill-chunk", "16", "--target", "qnn-htp", "--precision", "fp16", "--soc", "sm8750")
    assert done.returncode == 0, done.stderr[-3000:]
    for kind, floor in (("vision", 40.0), ("audio", 55.0)):  # measured 46.6 and 64.9 dB
        component = out / f"{kind}-qnn-sm8750-fp16"
        assert cli("verify", str(component)).returncode == 0
        assert _checks(component, "numerical.json")["embeds_sqnr_db"] >= floor
        assert _checks(component, "task.json")["media_greedy_agreement"] == 1.0
    info = cli("run", "--plan", str(out / "plan.json"), "--image", str(media["red"]), "--prompt", "hi",
               "--max-new-tokens", "2", "--info")
    assert info.returncode == 0, info.stderr[-2000:]
    placements = json.JSONDecoder().raw_decode(info.stderr[info.stderr.index("{"):])[0]["placements"]
    engines = {p["graph"]: (p["device"], p["engine"]) for p in placements}
    assert engines["image_encoder_1x32x32"] == engines["audio_encoder_chunk"] == ("npu", "QNNExecutionProvider")
    assert engines["decode_s512"] == ("cpu", "CPUExecutionProvider")
    refused = cli("export", "llm", "--checkpoint", str(omni_checkpoint), "--out", str(tmp_path / "w8"), "--buckets",
                  "512", "--prefill-chunk", "16", "--target", "qnn-htp", "--precision", "w8a16", "--soc", "sm8750")
    assert refused.returncode == 2 and "cannot run /merger/mlp/mlp.1/Erf (Erf)" in refused.stderr


def test_image_and_audio_in_text_and_speech_out(omni_checkpoint: Path, voice_plan: Path, media: dict[str, Path]) -> None:
    """The multimodal thinker's plan joined with a talker that reads its hidden states (export
    omni): one request with an image and audio answers in text (generate's ids) and speech (the
    talker's codes equal the PyTorch dual-track reference fed with transformers' hidden states
    along those tokens, media included); the audio is exact in length."""
    from numeric import assert_codes
    from omni_edge.export.models.qwen3_tts.reference import SAMPLES_PER_FRAME, Qwen3Tts, stream_codes_from_hidden
    from omni_edge.runtime import OmniSession

    plan, talker = voice_plan, voice_plan.parent.parent / "talker"
    stages = json.loads(plan.read_text())["stages"]
    assert [(s["model_stage"], s["input_sources"]) for s in stages] == [
        ("vision_encoder", []), ("audio_encoder", []), ("thinker", [0, 1]), ("talker", [2]), ("code2wav", [3])]
    items, tokens, frames = [("image", media["red"]), ("audio", media["tone16"])], 8, 12
    session = OmniSession.open(plan, threads=2)
    result = session.run("Describe it.", chat=True, media=[(k, str(p)) for k, p in items], max_new_tokens=tokens,
                         ignore_stop_tokens=True, max_frames=frames)
    got = [t for e in result.text_events if e["kind"] == "token" for t in e["token_ids"]]
    assert got == _generate(omni_checkpoint, items, "Describe it.", tokens)
    # transformers' last decoder layer (pre-norm) at each position that produced a token, from its
    # own generate (the same tokens, asserted above): the prefill's last row, then each step's.
    thinker = load_thinker(omni_checkpoint)
    inputs = reference_inputs(omni_checkpoint, thinker, items, "Describe it.", chat=True)
    captured: list[torch.Tensor] = []
    hook = thinker.model.model.language_model.layers[-1].register_forward_hook(
        lambda _m, _i, out: captured.append((out[0] if isinstance(out, tuple) else out)[0, -1].clone()))
    with torch.no_grad():
        thinker.model.generate(**inputs, max_new_tokens=tokens, min_new_tokens=tokens, do_sample=False)
    hook.remove()
    hidden = torch.stack(captured[:tokens])
    model = Qwen3Tts.from_pretrained(talker)
    assert len(session.codes()) == frames and result.pcm.shape[0] == frames * SAMPLES_PER_FRAME
    assert_codes(session.codes(), lambda trace: list(stream_codes_from_hidden(model, hidden, frames, trace=trace)),
                 frames, model.ids.eos, "talker")


def test_profile_reports_the_multimodal_dimensions(omni_artifact: Path, tmp_path: Path) -> None:
    """`omni-edge profile` on the multimodal plan sends an image and audio with every request and
    reports each encoder's preprocessing and graph time, the thinker's wait for their rows, the
    rest of the chain to the first token, and the audio encoder's tokens per second of audio."""
    out = tmp_path / "profile"
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan",
               str(omni_artifact / "plan.json"), "--runs", "3", "--warmup", "1", "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((out / "report.json").read_text())
    assert report["workload"]["media"] == ["image", "audio"]
    metrics = report["groups"]["concurrency-1"]["metrics"]
    for key in ("media_wait_ms", "after_media_ttft_ms", "image_preprocess_ms", "image_encode_ms",
                "audio_preprocess_ms", "audio_encode_ms"):
        assert metrics[key]["n"] == 3 and metrics[key]["p50"] > 0, key
    assert metrics["media_tokens"]["p50"] == 256 + audio_tokens(400)  # a 448x448 image, 4 s of audio
    assert abs(metrics["audio_tokens_per_second"]["p50"] - 25.0) < 0.5
    assert metrics["after_media_ttft_ms"]["p50"] < metrics["ttft_ms"]["p50"]


def test_a_continued_conversation_hears_each_turn_as_transformers_does(omni_checkpoint: Path, omni_artifact: Path,
                                                                       media: dict[str, Path]) -> None:
    """A realtime conversation's second spoken turn continues the first in the thinker's resident
    KV cache: its audio is spliced after the first turn and the reply, its M-RoPE positions go on
    from the first turn's (an image's 2-D positions make them differ from plain ones), and the
    reply is transformers' greedy generate on the whole conversation: turn one, the first reply
    as the session made it (cut by length, so closed with <|im_end|>), turn two."""
    from omni_edge.runtime import Session
    from transformers import AutoTokenizer

    session = Session.open(omni_artifact / "plan.json", threads=2)
    first_items, second_items = [("image", media["red"]), ("audio", media["tone16"])], [("audio", media["chirp"])]

    def turn(items: list[tuple[str, Path]], prompt: str, n: int, continues: bool) -> list[int]:
        ids: list[int] = []
        session.run(prompt, chat=True, media=[(k, str(p)) for k, p in items], max_new_tokens=n, ignore_stop_tokens=True,
                    continue_conversation=continues, on_event=lambda e: ids.extend(e.get("token_ids", [])) or True)
        return ids

    first = turn(first_items, "Describe it.", 6, False)
    second = turn(second_items, "And this?", 8, True)
    assert first == _generate(omni_checkpoint, first_items, "Describe it.", 6)

    thinker = load_thinker(omni_checkpoint)
    tokenizer = AutoTokenizer.from_pretrained(omni_checkpoint)
    one = reference_inputs(omni_checkpoint, thinker, first_items, "Describe it.", chat=True)
    two = reference_inputs(omni_checkpoint, thinker, second_items, "And this?", chat=True)
    closing = [tokenizer.convert_tokens_to_ids("<|im_end|>"), *tokenizer.encode("\n", add_special_tokens=False)]
    ids = torch.cat([one["input_ids"][0], torch.tensor(first + closing), two["input_ids"][0]])[None]
    inputs = {"input_ids": ids, "attention_mask": torch.ones_like(ids), "pixel_values": one["pixel_values"],
              "image_grid_thw": one["image_grid_thw"],
              "input_features": torch.cat([one["input_features"], two["input_features"]]),
              "feature_attention_mask": torch.cat([one["feature_attention_mask"], two["feature_attention_mask"]])}
    with torch.no_grad():
        out = thinker.model.generate(**inputs, max_new_tokens=8, min_new_tokens=8, do_sample=False)
    assert second == [int(t) for t in out[0, ids.shape[1]:]]
