"""A Qwen3-TTS release's talker: the release layout loads as it is (config, bfloat16 weights under
the release's names, a Qwen2 vocab.json + merges.txt tokenizer), and its codes equal those that
the release implementation's own generate() made (qwen-tts 0.1.1, greedy with its repetition
penalty), token for token up to near ties (tests/numeric.py), through the PyTorch reference,
the exported graphs and the native chain, for both prompt shapes (language + speaker; auto
language + instruction) and with the text read one token per frame (generate()'s streaming
text)."""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import torch
from llm_reference import CLI
from numeric import FP32_TIE_GAP, assert_codes
from omni_edge.contracts.errors import ContractError
from omni_edge.export.models.qwen3_tts.reference import ABSENT, Qwen3Tts, Sampling, Trace, compare_codes, generate_codes
from omni_edge.export.options import TtsExportOptions
from omni_edge.export.registry import export_checkpoint
from omni_edge.export.speech import StreamShape, Voice
from omni_edge.runtime import SpeechSession
from paths import DATA
from safetensors.torch import load_file, save_file

FIXTURE = DATA / "qwen3_tts_release"
CASES: list[dict[str, Any]] = json.loads((FIXTURE / "reference.json").read_text())["cases"]
REFERENCE = load_file(str(FIXTURE / "reference.safetensors"))
RUN = CLI.parent / "omni-edge-run"
GREEDY = Sampling(repetition_penalty=1.05)  # generate(do_sample=False, subtalker_dosample=False)


def _reference(model: Qwen3Tts, text: list[int], frames: int) -> Callable[[Trace], torch.Tensor]:
    """The PyTorch reference as generate() decodes (greedy, repetition penalty 1.05)."""
    return lambda trace: generate_codes(model, text, frames, GREEDY, trace)


def voice(i: int) -> Voice:
    c = CASES[i]
    return Voice(str(c["speaker"]), str(c["language"]), str(c["instruct"]), bool(c["stream_text"]))


def options(v: Voice, frames: int = 23) -> TtsExportOptions:
    return TtsExportOptions(prefill_chunk=16, buckets=(128,), validation_frames=frames, voice=v,
                            stream=StreamShape(first=1, chunk=5, left_context=8, adaptive=False))


@pytest.mark.host_numerics
@pytest.mark.parametrize("i", range(len(CASES)))
def test_reference_codes_equal_the_release_generate(i: int) -> None:
    model = Qwen3Tts.from_pretrained(FIXTURE, voice(i))
    text = model.tokenizer.encode(CASES[i]["text"]).ids
    # The text tokens are the ones generate() read: the chat template's [3:-5].
    assert text == REFERENCE[f"input_ids_{i}"][0, 3:-5].tolist()
    want = REFERENCE[f"codes_{i}"]
    assert want.shape == (23, 16)
    assert_codes(generate_codes(model, text, 23, GREEDY), _reference(model, text, 23), 23, model.ids.eos,
                 "PyTorch vs generate()", expected=want)
    assert model.min_frames == 2 and model.sampling == Sampling(temperature=0.9, top_k=50, repetition_penalty=1.05)


@pytest.mark.host_numerics
def test_the_repetition_penalty_matters() -> None:
    """Without it the first case's codes part from generate()'s (so the checks above can fail)."""
    model = Qwen3Tts.from_pretrained(FIXTURE, voice(0))
    text = model.tokenizer.encode(CASES[0]["text"]).ids
    agreement, _ = compare_codes(_reference(model, text, 23), generate_codes(model, text, 23, Sampling()), 23,
                                 model.ids.eos, FP32_TIE_GAP, REFERENCE["codes_0"])
    assert not agreement.passed, agreement.describe()


def test_the_prompt_is_the_release_one() -> None:
    speaker = Qwen3Tts.from_pretrained(FIXTURE, voice(0)).prompt
    pad, bos, eos = 403, 404, 405  # the fixture's tts_pad / tts_text_bos / tts_text_eod
    role = [(401, ABSENT), (271, ABSENT), (198, ABSENT)]  # <|im_start|> assistant \n
    assert list(speaker.head) == [*role, (pad, 2154), (pad, 2156), (pad, 2050), (pad, 2157), (pad, 3000), (bos, 2148)]
    assert speaker.text_codec == 2148 and list(speaker.tail) == [(eos, 2148), (pad, 2149)] and speaker.frame_text == pad
    streamed = Qwen3Tts.from_pretrained(FIXTURE, voice(2)).prompt  # the first text token beside the codec bos
    assert streamed.head == speaker.head and streamed.text_codec == 2149 and streamed.tail == ()
    assert streamed.rows([7, 8, 9])[-1] == (7, 2149) and streamed.frame_texts([7, 8, 9]) == [8, 9, eos]
    instructed = Qwen3Tts.from_pretrained(FIXTURE, voice(1)).prompt
    assert all(codec == ABSENT for _, codec in instructed.head[:-4])  # instruction and role rows: text only
    assert [codec for _, codec in instructed.head[-4:]] == [2155, 2156, 2157, 2148]  # nothink, no language/speaker


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> list[Path]:
    plans = []
    for i in range(len(CASES)):
        out = tmp_path_factory.mktemp(f"release-{i}")
        [(component, got)] = export_checkpoint(FIXTURE, out, options(voice(i)))
        assert got["codes_agree_to_near_tie"] == 1.0 and got["frames"] == 23 and got["pcm_sqnr_db"] >= 80.0, got
        assert (component / "tokenizer.json").is_file()  # converted from vocab.json + merges.txt
        plans.append(out / "plan.json")
    return plans


@pytest.mark.parametrize("i", range(len(CASES)))
def test_native_codes_equal_the_release_generate(exported: list[Path], i: int) -> None:
    talker = json.loads(exported[i].read_text())["stages"][0]["talker"]
    assert talker["min_frames"] == 2 and talker["sampling"]["repetition_penalty"] == 1.05
    session = SpeechSession.open(exported[i])
    utterance = session.speak(CASES[i]["text"], max_frames=23, prebuffer_ms=0,
                              sampling={"temperature": 0.0, "repetition_penalty": 1.05})
    model = Qwen3Tts.from_pretrained(FIXTURE, voice(i))
    text = model.tokenizer.encode(CASES[i]["text"]).ids
    assert_codes(session.codes(), _reference(model, text, 23), 23, model.ids.eos, "native vs generate()",
                 expected=REFERENCE[f"codes_{i}"])
    assert utterance.pcm.shape == (23 * 1920,)
    # The plan's own sampling (the release's: temperature 0.9, top-k 50) speaks too, within the codebook.
    session.speak(CASES[i]["text"], max_frames=8, prebuffer_ms=0)
    codes = torch.tensor(session.codes())
    assert codes.shape == (8, 16) and int(codes.max()) < 2048


def test_end_of_speech_waits_for_min_frames(tmp_path: Path) -> None:
    """A talker that wants to end at once (the fixture's two eager tensors) still speaks the two
    frames generate()'s min_new_tokens=2 makes it speak, the same two, in the reference and in
    the native chain."""
    eager = tmp_path / "eager"
    shutil.copytree(FIXTURE, eager)
    weights = {k: v.float() for k, v in load_file(str(eager / "model.safetensors")).items()}
    weights["talker.text_projection.linear_fc2.bias"] = REFERENCE["eager_fc2_bias"]
    weights["talker.codec_head.weight"][2150] = REFERENCE["eager_eos_row"]
    save_file(weights, str(eager / "model.safetensors"))
    want = REFERENCE["codes_eager"]
    assert want.shape == (2, 16)
    model = Qwen3Tts.from_pretrained(eager, voice(0))
    text = model.tokenizer.encode(CASES[0]["text"]).ids
    reference = _reference(model, text, 10)
    assert_codes(generate_codes(model, text, 10, GREEDY), reference, 10, model.ids.eos, "PyTorch", expected=want)
    out = tmp_path / "out"
    export_checkpoint(eager, out, options(voice(0), frames=10))
    session = SpeechSession.open(out / "plan.json")
    utterance = session.speak(CASES[0]["text"], max_frames=10, prebuffer_ms=0,
                              sampling={"temperature": 0.0, "repetition_penalty": 1.05})
    assert utterance.metrics["frames"] == 2 and utterance.metrics["finish_reason"] == "eos"
    assert_codes(session.codes(), reference, 10, model.ids.eos, "native", expected=want)


@pytest.mark.parametrize(("choice", "message"), [
    (Voice(speaker="nobody"), "speaker 'nobody' is not one of this release's: ryan, vivian"),
    (Voice(language="klingon"), "language 'klingon' is not one of this release's: auto, chinese, english"),
])
def test_unknown_voices_are_refused(choice: Voice, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        Qwen3Tts.from_pretrained(FIXTURE, choice)


def test_release_choices_on_other_checkpoints_are_refused(tts_checkpoint: Path, tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="speakers, languages and instructions are a Qwen3-TTS release's"):
        Qwen3Tts.from_pretrained(tts_checkpoint, Voice(speaker="vivian"))
    small = tmp_path / "0b6"
    shutil.copytree(FIXTURE, small)
    config = json.loads((small / "config.json").read_text())
    config["tts_model_size"] = "0b6"
    (small / "config.json").write_text(json.dumps(config))
    with pytest.raises(ValueError, match=r"the 0\.6B release takes no instruction"):
        Qwen3Tts.from_pretrained(small, Voice(instruct="Speak slowly."))
    (small / "vocab.json").unlink()
    with pytest.raises(ValueError, match="no text tokenizer"):
        Qwen3Tts.from_pretrained(small)
    # The CLI says so without a traceback.
    run = subprocess.run([str(CLI), "export", "tts", "--checkpoint", str(FIXTURE), "--out", str(tmp_path / "x"),
                          "--speaker", "nobody"], capture_output=True, text=True)
    assert run.returncode == 2 and "speaker 'nobody'" in run.stderr and "Traceback" not in run.stderr


def test_malformed_prompts_in_a_plan_are_refused(exported: list[Path], tmp_path: Path) -> None:
    plan = json.loads(exported[0].read_text())
    artifact = str(exported[0].parent / plan["stages"][0]["artifact"])
    broken: list[tuple[str, Any]] = [
        ("expected [text id, codec id]", lambda t: t["prompt"]["head"].append([1])),
        ("outside codebook 0's vocabulary", lambda t: t["prompt"]["tail"].append([1, 3072])),
        ("prompt.head[0][0]", lambda t: t["prompt"]["head"][0].__setitem__(0, -4)),
        ("outside the tokenizer", lambda t: t["prompt"].update(frame_text=10 ** 6)),
        ("prompt.frame_text", lambda t: t["prompt"].pop("frame_text")),
        ("min_frames", lambda t: t.update(min_frames=-1)),
        ("text_end: only with stream_text", lambda t: t["prompt"].update(text_end=5)),
        ("stream_text", lambda t: t["prompt"].update(stream_text="yes")),
    ]
    for expected, mutate in broken:
        bad = json.loads(json.dumps(plan))
        for stage in bad["stages"]:
            stage["artifact"] = artifact
        mutate(bad["stages"][0]["talker"])
        path = tmp_path / "plan.json"
        path.write_text(json.dumps(bad))
        with pytest.raises(ContractError) as err:
            SpeechSession.open(path)
        assert expected in err.value.message, err.value.message


def test_the_native_cli_takes_the_release_sampling_flags(exported: list[Path], tmp_path: Path) -> None:
    """omni-edge-run speak (the C ABI) with greedy + the release's repetition penalty speaks the
    codes of generate(): its WAV equals the Python session's for the same request."""
    out = tmp_path / "out.wav"
    run = subprocess.run([str(RUN), "speak", "--plan", str(exported[0]), "--text", CASES[0]["text"], "--out", str(out),
                          "--max-frames", "23", "--temperature", "0", "--repetition-penalty", "1.05",
                          "--prebuffer-ms", "0"], capture_output=True, text=True, timeout=600)
    assert run.returncode == 0, run.stderr[-2000:]
    session = SpeechSession.open(exported[0])
    session.speak(CASES[0]["text"], max_frames=23, prebuffer_ms=0, wav=tmp_path / "python.wav",
                  sampling={"temperature": 0.0, "repetition_penalty": 1.05})
    assert out.read_bytes() == (tmp_path / "python.wav").read_bytes()  # one native chain: exact
    plain = subprocess.run([str(RUN), "speak", "--plan", str(exported[0]), "--text", CASES[0]["text"], "--out",
                            str(tmp_path / "plain.wav"), "--max-frames", "23", "--temperature", "0"],
                           capture_output=True, text=True, timeout=600)
    assert plain.returncode == 0 and (tmp_path / "plain.wav").read_bytes() != out.read_bytes()  # the penalty matters


def test_prompts_that_cannot_be_spoken_are_clear_errors(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="needs at least one text token"):
        Qwen3Tts.from_pretrained(FIXTURE, voice(2)).prompt.rows([])
    long = Voice("vivian", "english", instruct="Speak slowly. " * 40)  # the instruction alone fills the bucket
    with pytest.raises(ValueError, match="do not fit the talker bucket of 128"):
        export_checkpoint(FIXTURE, tmp_path, options(long))
