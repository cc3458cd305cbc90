"""MiniCPM-o 4.5's thinker reference against vLLM-Omni 0.30.0's own code: a tiny checkpoint in the
release's layout, loaded by vLLM-Omni's thinker, and what its image processor, vision tower +
resampler and audio encoder + projector made of real media (tests/data/minicpmo45/make_fixture.py).
The same checkpoint through the local modules must give the same slices, placeholders and
embeddings (rule 2: committed fixture, compared by SQNR)."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from minicpmo45_media import audio_inputs, image_inputs
from numeric import assert_sqnr
from omni_edge.export.models.minicpmo45.config import read_config
from omni_edge.export.models.minicpmo45.reference import (
    Media,
    Thinker,
    audio_embeddings,
    generate,
    image_embeddings,
    load_thinker,
    render_prompt,
)
from omni_edge.export.models.minicpmo45.vision import image_placeholder, patch_strip, slice_image
from omni_edge.export.registry import of_checkpoint
from paths import DATA
from safetensors.torch import load_file

FIXTURE = DATA / "minicpmo45"
CHECKPOINT = FIXTURE / "checkpoint"
CASES: dict[str, Any] = json.loads((FIXTURE / "reference.json").read_text())["cases"]
REFERENCE = load_file(str(FIXTURE / "reference.safetensors"))
STRIDE = 29  # make_fixture.py keeps every 29th column of the pixel strips
EMBEDDINGS_DB = 100.0  # fp32, summation order only (measured 132-133 dB images, 131-135 dB audio)
PIXELS_DB = 120.0      # the same Pillow resize and float32 normalization (measured: bit-equal)


@pytest.fixture(scope="module")
def thinker() -> Thinker:
    return load_thinker(CHECKPOINT)


@pytest.mark.parametrize("case", range(len(CASES["images"])))
def test_images_are_sliced_placed_and_embedded_as_vllm_omni_does(thinker: Thinker, case: int) -> None:
    expected = CASES["images"][case]
    name, image = image_inputs()[case]
    assert name == expected["name"]
    sliced = slice_image(image, thinker.config.slices)
    patch = thinker.config.vision.patch
    assert [[h // patch, w // patch] for h, w in sliced.sizes] == expected["tgt_sizes"]
    assert (list(sliced.grid) if sliced.grid else None) == expected["grid"]
    assert image_placeholder(sliced.grid, thinker.config.slices, case) == expected["placeholder"]
    for j, x in enumerate(sliced.slices):
        assert_sqnr(REFERENCE[f"image.{name}.strip{j}"], patch_strip(x, patch)[..., ::STRIDE], PIXELS_DB, f"{name} slice {j}")
    assert_sqnr(REFERENCE[f"image.{name}.embeddings"], image_embeddings(thinker, image), EMBEDDINGS_DB, name)


@pytest.mark.parametrize("case", range(len(CASES["audio"])))
def test_audio_is_embedded_as_vllm_omni_does(thinker: Thinker, case: int) -> None:
    expected = CASES["audio"][case]
    name, samples = audio_inputs()[case]
    assert name == expected["name"] and len(samples) == expected["samples"]
    got = audio_embeddings(thinker, samples)
    reference = REFERENCE[f"audio.{name}.embeddings"]
    assert got.shape == reference.shape  # 10 a second; a clip past 30 s in two pieces
    assert_sqnr(reference, got, EMBEDDINGS_DB, name)


def test_a_request_places_every_embedding_and_stops_on_the_speech_end(thinker: Thinker) -> None:
    """The red square and the tone in one spoken request: the prompt's `<unk>`s are exactly the
    media's embeddings, the turn ends with thinking off and `<|tts_bos|>`, and the greedy reply is
    the same whether the embeddings are placed by the reference or fed row by row."""
    media = [Media("image", image_inputs()[0][1]), Media("audio", audio_inputs()[0][1])]
    text = render_prompt(thinker, media, "What do you see and hear?", speech=True)
    assert text.endswith("<|im_start|>assistant\n<think>\n\n</think>\n\n<|tts_bos|>")
    assert text.count("<unk>") == thinker.config.slices.query_num + 20  # one slice; 2 s of audio
    ids, reply = generate(thinker, media, "What do you see and hear?", 12, speech=True)
    assert reply.hidden.shape == (len(reply.ids), thinker.config.hidden)
    embeds = thinker.llm.model.embed_tokens(torch.tensor([ids]))
    with torch.no_grad():
        # Replacing the media rows by zeros changes the reply's first logits: they are read.
        from omni_edge.export.models.minicpmo45.reference import input_embeddings

        placed = input_embeddings(thinker, ids, media)
        assert not torch.equal(placed, embeds)
        first = thinker.llm(inputs_embeds=placed).logits[0, -1]
    assert reply.ids[0] == int(torch.argmax(first))


def test_the_registry_takes_4_5_and_refuses_2_6_by_name(tmp_path: Path) -> None:
    assert of_checkpoint(CHECKPOINT).name == "minicpmo-4.5"
    config = json.loads((CHECKPOINT / "config.json").read_text())
    for version, said in (("2.6", "MiniCPM-o 2.6 is not supported"), (None, "without a version")):
        target = tmp_path / str(version)
        shutil.copytree(CHECKPOINT, target)
        changed = {k: v for k, v in config.items() if k != "version"} | ({"version": version} if version else {})
        (target / "config.json").write_text(json.dumps(changed))
        with pytest.raises(ValueError, match=said):
            of_checkpoint(target)
        with pytest.raises(ValueError, match=said):
            read_config(target)


def test_a_checkpoint_missing_a_tensor_or_shaped_otherwise_is_refused_by_name(tmp_path: Path) -> None:
    from safetensors.torch import save_file

    weights = load_file(str(CHECKPOINT / "model.safetensors"))
    from omni_edge.export.models.minicpmo45.reference import load_talker

    for name, change, load in (("resampler.query", None, load_thinker), ("apm.conv1.weight", torch.zeros(3, 3, 3), load_thinker),
                               ("tts.head_code.0.parametrizations.weight.original1", None, load_talker),
                               ("tts.emb_code.0.weight", torch.zeros(7, 7), load_talker)):
        target = tmp_path / name
        shutil.copytree(CHECKPOINT, target)
        changed = {k: v for k, v in weights.items() if k != name} | ({name: change} if change is not None else {})
        save_file(changed, str(target / "model.safetensors"))
        with pytest.raises(ValueError, match=name.replace("tts.", "").replace(".", r"\.")):
            load(target)


def test_the_media_inputs_are_real(thinker: Thinker) -> None:
    """The photo is a photo and the speech is speech (not silence): what the fixture measured."""
    hopper = np.asarray(image_inputs()[1][1], np.float32)
    assert hopper.std() > 30
    speech = audio_inputs()[1][1]
    assert np.abs(speech).max() > 0.1


@pytest.mark.parametrize("size", [None, (300, 2000), (168, 1400), (500, 500), (1337, 211), (20, 30)])
def test_the_native_slicing_is_bit_equal_to_the_reference(thinker: Thinker, size: tuple[int, int] | None) -> None:
    """The controller's slices (what a device computes) against the reference processor's, for
    the fixture's images and shapes where Pillow 13 resizes vertically first (tall ones)."""
    from minicpmo45_media import photo
    from omni_edge import _native

    images = [image for _, image in image_inputs()] if size is None else [photo().resize(size)]
    config = (CHECKPOINT / "preprocessor_config.json").read_text()
    for image in images:
        cols, rows, native = _native.slice_image(np.asarray(image, np.uint8).tobytes(), image.size[0], image.size[1], config)
        reference = slice_image(image, thinker.config.slices)
        assert ((cols, rows) if cols else None) == reference.grid
        assert len(native) == len(reference.slices)
        for (h, w, strip), x in zip(native, reference.slices, strict=True):
            assert (h * 14, w * 14) == x.shape[1:]
            assert np.array_equal(np.frombuffer(strip, np.float32), patch_strip(x, 14).ravel())


def test_the_talker_makes_vllm_omnis_codes_from_the_thinkers_spoken_reply() -> None:
    """The fixture's talker codes were made by vLLM-Omni's own talker (its condition, weight-norm
    head and loader; transformers' Llama as its backbone) from the thinker reference's reply to the
    red square and the tone; the local talker on the same ids and hidden states makes the same
    codes, up to near ties (rule 3), the end masked for the first 50 as the deploy config asks."""
    from omni_edge.export.comparison import FP32_TIE_GAP
    from omni_edge.export.models.minicpmo45.reference import load_talker
    from omni_edge.export.models.minicpmo45.talker import generate_codes

    talker = load_talker(CHECKPOINT)
    ids = [int(t) for t in REFERENCE["talker.ids"]]
    expected = [int(c) for c in REFERENCE["talker.codes"]]
    got = generate_codes(talker, ids, REFERENCE["talker.hidden"], len(expected))
    assert len(got.codes) == len(expected) == CASES["talker"][0]["codes"]
    for step, (a, b) in enumerate(zip(got.codes, expected, strict=True)):
        if a != b:  # a near tie of the local logits may part them; after that the paths differ
            gap = float(got.logits[step].max() - got.logits[step][b])
            assert gap < FP32_TIE_GAP, f"code {step}: {a} against vLLM-Omni's {b} (gap {gap:.2e})"
            break
    assert len(set(expected)) > 5  # the codes vary: a real decode, not one id repeated


def test_the_hift_vocoder_streams_vllm_omnis_samples() -> None:
    """token2wav's HiFT at the release's shape (20.8 M parameters, random weights from numpy):
    two streamed chunks (the second after the first's last 8 mel frames, with its source tail as
    the cache) equal what vLLM-Omni's own HiFTGenerator made of them with torch's noise seeded
    alike (rule 2: 480 samples per frame, SQNR)."""
    from minicpmo45_media import HIFT_CHECK, check_mels
    from omni_edge.export.models.minicpmo45.hift import random_hift, vocode

    hift = random_hift()
    first, second = check_mels()
    with torch.no_grad():
        assert float(hift.f0_predictor(first).min()) > 10  # voiced throughout: the harmonic source runs
    torch.manual_seed(HIFT_CHECK[0])
    speech1, source1 = vocode(hift, first)
    torch.manual_seed(HIFT_CHECK[1])
    speech2, _ = vocode(hift, torch.cat([first[:, :, -8:], second], dim=2), source1[:, :, -3840:])
    assert speech1.shape == (1, 40 * 480) and speech2.shape == (1, 32 * 480)
    assert float(speech1.abs().max()) < 0.99  # unclipped: the comparison sees the vocoder, not the clamp
    for got, name in ((speech1, "hift.speech1"), (speech2, "hift.speech2")):
        assert_sqnr(REFERENCE[name], got, 90.0, name)  # measured: bit-equal on the CPU that wrote the fixture


def test_token2wav_streams_vllm_omnis_samples() -> None:
    """Codes -> PCM as vLLM-Omni streams them (BatchedToken2Wav over minicpmo-utils' Step-Audio2
    flow and its own HiFT; the release's widths, one conformer layer per half and two DiT blocks,
    4 Euler steps, random weights from numpy): the bridge's windows (3 carried + 25 new, the last
    shorter), the voice prompt's caches, HiFT's carried mel and source, the cross-fades. The port
    makes the same samples, 480 x 2 x (codes + 3) of them (rule 2)."""
    from minicpmo45_media import T2W_SEED, check_codes, check_voice, t2w_config
    from omni_edge.export.models.minicpmo45.flow import random_flow
    from omni_edge.export.models.minicpmo45.hift import random_hift
    from omni_edge.export.models.minicpmo45.token2wav import Token2Wav, windows

    codes, voice = check_codes(), check_voice()
    streamer = Token2Wav(random_flow(t2w_config()), random_hift(), steps=4)  # type: ignore[arg-type]
    state = streamer.start(voice)  # type: ignore[arg-type]
    out = []
    for i, (window, last) in enumerate(windows(codes)):
        torch.manual_seed(T2W_SEED + i)
        samples, state = streamer.decode(voice, state, window, last)  # type: ignore[arg-type]
        out.append(samples)
    got = torch.cat(out)
    assert [len(w) for w, _ in windows(codes)] == [28, 28, 13]
    assert got.shape == (480 * 2 * (len(codes) + 3),)
    assert_sqnr(REFERENCE["token2wav.samples"], got, 60.0, "token2wav")  # measured 85 dB (max difference 6.8e-6)


def test_the_roadmaps_request_is_spoken_by_the_three_stages(tmp_path: Path) -> None:
    """The red square and the 2 s tone, spoken: the thinker's reply, the talker's codes for it
    (at least 50), token2wav's samples (the tiny preset's files as make-checkpoint writes them,
    read back from their release layout; a stand-in voice from a LibriVox recording's mel)."""
    from minicpmo45_media import speech_clips
    from omni_edge.export.models.minicpmo45.checkpoint import TOKEN2WAV
    from omni_edge.export.models.minicpmo45.reference import load_talker, speak
    from omni_edge.export.models.minicpmo45.token2wav import stand_in_voice
    from omni_edge.export.models.minicpmo45.token2wav_files import flow_config, load_token2wav, write_token2wav
    from scipy.signal import resample_poly  # type: ignore[import-untyped]

    flow, hift = TOKEN2WAV["tiny"]
    shutil.copytree(CHECKPOINT, tmp_path / "ck")
    directory = write_token2wav(tmp_path / "ck", flow, hift, seed=0)
    assert flow_config(directory / "flow.yaml") == flow
    voice = stand_in_voice(resample_poly(speech_clips()[0], 3, 2)[:3 * 24000])
    thinker = load_thinker(tmp_path / "ck")
    media = [Media("image", image_inputs()[0][1]), Media("audio", audio_inputs()[0][1])]
    speech = speak(thinker, load_talker(tmp_path / "ck"), load_token2wav(tmp_path / "ck", steps=4), voice, media,
                   "What do you see and hear?", 8, 60)
    assert 50 <= len(speech.codes) <= 60
    assert speech.pcm.shape == (960 * (len(speech.codes) + 3),)  # 2 mel frames of 480 samples per code
    assert bool(torch.isfinite(speech.pcm).all()) and float(speech.pcm.abs().max()) <= 0.99
    assert float(speech.pcm.std()) > 1e-4  # not silent


def test_a_flow_yaml_without_its_sizes_is_refused_by_name(tmp_path: Path) -> None:
    from omni_edge.export.models.minicpmo45.token2wav_files import flow_config, load_token2wav

    (tmp_path / "flow.yaml").write_text("flow: !new:cosyvoice2.flow.flow.CausalMaskedDiffWithXvec\n    input_size: 512\n")
    with pytest.raises(ValueError, match=r"flow\.yaml lacks or mistypes 'encoder'"):
        flow_config(tmp_path / "flow.yaml")
    with pytest.raises(ValueError, match=r"no assets/token2wav/flow\.yaml"):
        load_token2wav(tmp_path)
