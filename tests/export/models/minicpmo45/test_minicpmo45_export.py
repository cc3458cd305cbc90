"""`omni-edge export llm` on a MiniCPM-o 4.5 checkpoint (the fixture written through vLLM-Omni's
own thinker, with token2wav's files added): the thinker's decoder validated as any text LLM, one
vision graph per slice size of the asked image sizes and the audio piece graph, each held to the
reference modules, the talker's graphs on the native engine held to the PyTorch talker's codes,
token2wav's graphs to the reference's PCM, real media (the photo sliced into a grid, recorded
speech past 30 s) through the exported graphs and the native engine greedy-equal to the PyTorch
reference (rule 3), and the three stages natively (thinker -> talker -> token2wav) against the
reference chain."""

from __future__ import annotations

import json
import shutil
import subprocess
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import torch
from minicpmo45_media import audio_inputs, image_inputs
from omni_edge.export.models.minicpmo45.reference import Media, Thinker, generate, load_thinker
from omni_edge.export.models.minicpmo45.validation import exported_generate, greedy_agreement
from omni_edge.export.options import LlmExportOptions
from omni_edge.export.registry import export_checkpoint
from paths import DATA

CHECKPOINT = DATA / "minicpmo45" / "checkpoint"


@pytest.fixture(scope="module")
def exported(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[Path], Thinker]:
    """The fixture checkpoint with token2wav's files at the tiny preset's sizes (random weights),
    exported: the thinker's plans, the talker's, and the whole omni plan."""
    from omni_edge.export.models.minicpmo45.checkpoint import TOKEN2WAV
    from omni_edge.export.models.minicpmo45.token2wav_files import write_token2wav

    root = tmp_path_factory.mktemp("minicpmo45")
    checkpoint = root / "checkpoint"
    shutil.copytree(CHECKPOINT, checkpoint)
    write_token2wav(checkpoint, *TOKEN2WAV["tiny"], seed=5)
    opts = LlmExportOptions(buckets=(512,), prefill_chunk=32, threads=1, image_sizes=((448, 448), (512, 600)))
    plans = export_checkpoint(checkpoint, root / "art", opts)
    return root / "art", plans, load_thinker(checkpoint)


def _checks(path: Path) -> dict[str, Any]:
    report = json.loads(path.read_text())
    return {c["name"]: c["observed"] for c in report["checks"]}


def test_the_export_writes_validated_components_and_a_text_plan(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, _ = exported
    assert plans[0] == out / "plan.onnx.json" and (out / "plan.json").is_file()
    for component in ("thinker-onnx", "vision-onnx", "audio-onnx", "talker-onnx"):
        manifest = json.loads((out / component / "manifest.json").read_text())["metadata"]["artifact"]
        assert manifest["numerical_validation"]["passed"] and manifest["task_validation"]["passed"], component
    vision = json.loads((out / "vision-onnx" / "manifest.json").read_text())["metadata"]["vision"]
    assert vision["slice_sizes"] == [[24, 42], [32, 32], [35, 30]]  # the red square's one; the photo's three
    assert _checks(out / "vision-onnx" / "reports" / "numerical.json")["embeds_sqnr_db"] > 100  # measured 129
    assert _checks(out / "audio-onnx" / "reports" / "numerical.json")["embeds_sqnr_db"] > 100   # measured 131
    assert _checks(out / "audio-onnx" / "reports" / "task.json")["media_greedy_agreement"] == 1.0
    # The talker's graphs on the native engine, fed the thinker reference's spoken reply: the
    # PyTorch talker's 64 codes (the end masked for the first 50), to the near-tie rule.
    talker = _checks(out / "talker-onnx" / "reports" / "task.json")
    assert talker["code_agreement"] == 1.0 and talker["codes_compared"] == 64
    assert _checks(out / "talker-onnx" / "reports" / "numerical.json")["condition_sqnr_db"] > 100  # measured 147
    assert plans[-2:] == [out / "plan.talker-onnx.json", out / "plan.omni-onnx.json"]
    # token2wav's graphs stepped as the controller steps them, against the reference fed the same
    # noise: the whole PCM and every bridge window (three: 25, 25 and 10 new codes).
    assert _checks(out / "token2wav-onnx" / "reports" / "numerical.json")["pcm_sqnr_db"] > 50  # measured 64
    assert _checks(out / "token2wav-onnx" / "reports" / "task.json")["window_agreement"] == 1.0


def test_real_media_through_the_exported_graphs_match_the_reference(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, thinker = exported
    media = [Media("image", image_inputs()[1][1]), Media("audio", audio_inputs()[2][1])]  # photo; speech, 33 s
    with torch.no_grad():
        ids, ref = generate(thinker, media, "Describe both.", 12, ignore_stop=True)
    assert ids.count(thinker.token("<unk>")) == 3 * thinker.config.slices.query_num + 330
    got = exported_generate(thinker, plans[0], out, ids, media, 12, threads=1)
    assert greedy_agreement(got, ref) == 1.0, (got, ref.ids)


def test_an_image_whose_slices_have_no_graph_is_refused_by_size(exported: tuple[Path, list[Path], Thinker]) -> None:
    out, plans, thinker = exported
    media = [Media("image", image_inputs()[2][1])]  # 1000x400: slices the export was not asked for
    with torch.no_grad():
        ids, _ = generate(thinker, media, "Describe it.", 1)
    with pytest.raises(ValueError, match=r"no vision graph for a 20x50 slice"):
        exported_generate(thinker, plans[0], out, ids, media, 1)


def _native_ids(plan: Path, media: list[tuple[str, str]], prompt: str, tokens: int) -> list[int]:
    from omni_edge.runtime import Session

    got: list[int] = []

    def collect(event: dict[str, Any]) -> bool:
        got.extend(event.get("token_ids", []))
        return True

    Session.open(plan).run(prompt, chat=True, on_event=collect, media=media, max_new_tokens=tokens,
                           ignore_stop_tokens=True)
    return got


@pytest.mark.parametrize("case", ["red_square+tone", "photo+speech_33s"])
def test_the_controller_runs_the_whole_thinker_as_the_reference(exported: tuple[Path, list[Path], Thinker],
                                                               tmp_path: Path, case: str) -> None:
    """plan.json through the native session: the controller decodes the PNG and WAV, slices the
    image, cuts the audio into 30 s pieces, runs the encoder graphs, lays out the placeholders and
    decodes; its greedy ids equal the reference's on the same files (rule 3)."""
    from omni_edge.runtime.media import wav_bytes

    out, _, thinker = exported
    image, audio = (image_inputs()[0][1], audio_inputs()[0][1]) if case.startswith("red") else \
        (image_inputs()[1][1], audio_inputs()[2][1])
    image.save(tmp_path / "image.png")
    (tmp_path / "audio.wav").write_bytes(wav_bytes(audio, 16000))
    question = "What do you see and hear?"
    with torch.no_grad():
        _, ref = generate(thinker, [Media("image", image), Media("audio", audio)], question, 12, ignore_stop=True)
    got = _native_ids(out / "plan.json", [("image", str(tmp_path / "image.png")), ("audio", str(tmp_path / "audio.wav"))],
                      question, 12)
    assert greedy_agreement(got, ref) == 1.0, (got, ref.ids)


@pytest.mark.parametrize(("stage", "path", "value", "said"), [
    (0, ("encoder", "style"), "minicpm", "style: must be qwen2.5-omni or minicpmo"),
    (0, ("encoder", "query_num"), None, "query_num"),
    (1, ("encoder", "pool_step"), None, "pool_step"),
    (2, ("llm", "media", "style"), "qwen2.5-omni", "position_rows 3"),
])
def test_a_malformed_minicpmo_plan_is_refused_by_name(exported: tuple[Path, list[Path], Thinker], tmp_path: Path,
                                                     stage: int, path: tuple[str, ...], value: Any, said: str) -> None:
    from omni_edge.contracts.errors import ContractError
    from omni_edge.runtime import Session

    out, _, _ = exported
    plan = json.loads((out / "plan.json").read_text())
    section = plan["stages"][stage]
    for key in path[:-1]:
        section = section[key]
    if value is None:
        del section[path[-1]]
    else:
        section[path[-1]] = value
    for s in plan["stages"]:
        s["artifact"] = str(out / s["artifact"])
    (tmp_path / "plan.json").write_text(json.dumps(plan))
    with pytest.raises(ContractError, match=said):
        Session.open(tmp_path / "plan.json")


def test_cancel_at_random_points_ends_each_stream_once_and_the_next_request_is_whole(
        exported: tuple[Path, list[Path], Thinker], tmp_path: Path) -> None:
    """plan.json with the red square and the tone: the consumer cancels after k of its events for
    random k (before the first token included: the encoders' phase); each stream ends with exactly
    one terminal event, nothing after it, and the session then serves the whole request as before."""
    import random

    from omni_edge.runtime import Session
    from omni_edge.runtime.media import wav_bytes

    out, _, _ = exported
    image_inputs()[0][1].save(tmp_path / "red.png")
    (tmp_path / "tone.wav").write_bytes(wav_bytes(audio_inputs()[0][1], 16000))
    media = [("image", str(tmp_path / "red.png")), ("audio", str(tmp_path / "tone.wav"))]
    session = Session.open(out / "plan.json")
    whole = _native_ids(out / "plan.json", media, "What do you see and hear?", 12)
    kinds: list[str] = []
    session.run("What do you see and hear?", chat=True, media=media, max_new_tokens=12, ignore_stop_tokens=True,
                on_event=lambda e: kinds.append(e["kind"]) or True)
    assert kinds[-1] == "done" and len(kinds) >= 3  # events before the terminal one: where a cancel can land
    for k in sorted({0, 1, *random.Random(7).sample(range(len(kinds) - 1), min(4, len(kinds) - 1))}):
        events = _events_until(session, media, k)
        terminal = [e for e in events if e["kind"] in ("done", "cancelled", "error")]
        assert len(terminal) == 1 and events[-1] is terminal[0], (k, [e["kind"] for e in events])
        assert terminal[0]["kind"] == "cancelled", k
        again = [t for e in _events_until(session, media, 1 << 30) for t in e.get("token_ids", [])]
        assert again == whole, k


def _events_until(session: Any, media: list[tuple[str, str]], k: int) -> list[dict[str, Any]]:
    """A request's events, the consumer cancelling after the k-th."""
    events: list[dict[str, Any]] = []

    def consumer(e: dict[str, Any]) -> bool:
        events.append(e)
        return len(events) <= k

    session.run("What do you see and hear?", chat=True, media=media, max_new_tokens=12, ignore_stop_tokens=True,
                on_event=consumer)
    return events


OMNI_TOKENS, OMNI_CODES, OMNI_SEED = 12, 60, 7  # 60 codes: token2wav's windows of 25, 25 and 10


@pytest.fixture(scope="module")
def exported_pte(exported: tuple[Path, list[Path], Thinker]) -> Path:
    """The same checkpoint exported for ExecuTorch (encoders, thinker, talker and token2wav's whole
    windows as programs; token2wav's prompt, last window and HiFT on ONNX Runtime): every
    component validated as the export does it."""
    out, _, _ = exported
    plans = export_checkpoint(out.parent / "checkpoint", out.parent / "art-pte",
                              LlmExportOptions(buckets=(512,), prefill_chunk=32, threads=1, formats=("pte",)))
    assert [p.name for p in plans] == ["plan.pte.json", "plan.thinker-pte.json", "plan.talker-pte.json", "plan.omni-pte.json"]
    for component in ("vision-pte", "audio-pte", "thinker-pte", "talker-pte", "token2wav-onnx", "token2wav-pte"):
        manifest = json.loads((out.parent / "art-pte" / component / "manifest.json").read_text())["metadata"]["artifact"]
        assert manifest["numerical_validation"]["passed"] and manifest["task_validation"]["passed"], component
    return out.parent / "art-pte"


@pytest.mark.parametrize(("fmt", "case"), [("onnx", "red_square+tone"), ("onnx", "text"), ("pte", "red_square+tone")])
def test_the_three_stages_natively_equal_the_reference_chain(exported: tuple[Path, list[Path], Thinker],
                                                             request: pytest.FixtureRequest, tmp_path: Path,
                                                             fmt: str, case: str) -> None:
    """The roadmap's request (the red square and the 440 Hz tone; and text alone) through
    plan.omni-<fmt>.json (ONNX Runtime; ExecuTorch for the encoders, thinker and talker): the
    thinker's ids equal the reference's (rule 3); the talker's codes (greedy, at least 50) equal
    the PyTorch talker's fed the reference thinker's states for the same span (a reply cut by
    length loses its last token, as upstream); token2wav's PCM against the reference chain on
    those codes, HiFT's noise drawn alike."""
    from omni_edge.export.comparison import sqnr_db
    from omni_edge.export.models.minicpmo45.reference import load_talker
    from omni_edge.export.models.minicpmo45.talker import generate_codes
    from omni_edge.export.models.minicpmo45.token2wav import CounterDraws, Token2Wav
    from omni_edge.export.models.minicpmo45.token2wav_export import load_voice
    from omni_edge.export.models.minicpmo45.token2wav_files import load_token2wav
    from omni_edge.export.models.minicpmo45.validation import path_agreement
    from omni_edge.runtime import OmniSession
    from omni_edge.runtime.media import wav_bytes

    out, _, thinker = exported
    checkpoint = out.parent / "checkpoint"
    art = out if fmt == "onnx" else request.getfixturevalue("exported_pte")
    media: list[Media] = []
    files: list[tuple[str, str]] = []
    if case != "text":
        image, audio = image_inputs()[0][1], audio_inputs()[0][1]
        image.save(tmp_path / "red.png")
        (tmp_path / "tone.wav").write_bytes(wav_bytes(audio, 16000))
        media, files = [Media("image", image), Media("audio", audio)], [("image", str(tmp_path / "red.png")),
                                                                         ("audio", str(tmp_path / "tone.wav"))]
    question = "What do you see and hear?" if media else "Say something."
    session = OmniSession.open(art / f"plan.omni-{fmt}.json", threads=1)
    if fmt == "pte":
        assert {p["backend"] for p in session.placements()} == {"executorch", "onnxruntime"}
        steady = {p["graph"]: p["backend"] for p in session.placements() if "_steady_f" in str(p["graph"])}
        assert len(steady) == 6 and set(steady.values()) == {"executorch"}  # whole windows at 100, 150, 200 frames
    got = session.run(question, chat=True, media=files, max_new_tokens=OMNI_TOKENS, ignore_stop_tokens=True,
                      max_frames=OMNI_CODES, speech_sampling={"temperature": 0.0, "seed": OMNI_SEED})
    with torch.no_grad():
        _, ref = generate(thinker, media, question, OMNI_TOKENS, speech=True, ignore_stop=True)
    ids = [t for e in got.text_events for t in e.get("token_ids", [])]
    assert greedy_agreement(ids, ref) == 1.0, (ids, ref.ids)
    assert got.text_metrics["finish_reason"] == "length" and got.audio["finish_reason"] == "length"
    codes = [frame[0] for frame in session.codes()]
    span = ref.ids[:-1]  # cut by length: the last token's own state never came
    with torch.no_grad():
        talked = generate_codes(load_talker(checkpoint), span, ref.hidden[: len(span)], OMNI_CODES)
    assert len(codes) == OMNI_CODES and path_agreement(codes, talked.codes, talked.logits) == 1.0
    token2wav = load_token2wav(checkpoint)
    voice, _ = load_voice(token2wav.flow, None)
    pcm = Token2Wav(token2wav.flow, token2wav.hift, 10, CounterDraws(OMNI_SEED)).utterance(voice, codes).numpy()
    assert got.pcm.shape == pcm.shape == (960 * (OMNI_CODES + 3),)  # 2 mel frames of 480 samples per code
    assert sqnr_db(pcm, got.pcm) > 50  # measured 65
    assert float(np.sqrt(np.mean(got.pcm ** 2))) > 1e-3  # not silent
    assert got.audio["windows"] == 3
    # The voice prompt's caches are computed once and copied for every later request: the same PCM.
    again = session.run(question, chat=True, media=files, max_new_tokens=OMNI_TOKENS, ignore_stop_tokens=True,
                        max_frames=OMNI_CODES, speech_sampling={"temperature": 0.0, "seed": OMNI_SEED})
    assert np.array_equal(again.pcm, got.pcm)


def test_cancel_anywhere_in_the_three_stage_stream_ends_each_stream_once(exported: tuple[Path, list[Path], Thinker],
                                                                        tmp_path: Path) -> None:
    """plan.omni-onnx.json: the consumer cancels after k of its events (text or audio) for random
    k; each stream ends with exactly one terminal event and nothing after it; the next request
    speaks the whole reply as before."""
    import random

    from omni_edge.runtime import OmniSession
    from omni_edge.runtime.request import Request, Sampling

    out, _, _ = exported
    session = OmniSession.open(out / "plan.omni-onnx.json", threads=1)
    request = Request(prompt="Say something.", chat=True, max_new_tokens=OMNI_TOKENS, ignore_stop_tokens=True,
                      max_frames=OMNI_CODES, speech_sampling=Sampling(temperature=0.0, seed=OMNI_SEED))

    def run(k: int) -> dict[str, list[str]]:
        """Each stream's event kinds (the two streams interleave as their threads run)."""
        events: dict[str, list[str]] = {"text": [], "audio": []}

        def consumer(stream: str, event: dict[str, Any], pcm: Any) -> bool:
            events[stream].append(event["kind"])
            return sum(map(len, events.values())) <= k

        session.submit(request, consumer)
        return events

    whole = run(1 << 30)
    codes = session.codes()
    assert whole["text"][-1] == whole["audio"][-1] == "done"
    n = sum(map(len, whole.values()))
    for k in sorted({0, 1, *random.Random(11).sample(range(n - 2), 4)}):
        events = run(k)
        for stream, kinds in events.items():
            terminal = [kind for kind in kinds if kind in ("done", "cancelled", "error")]
            assert len(terminal) == 1 and kinds[-1] == terminal[0], (k, stream, kinds)
        assert run(1 << 30) == whole and session.codes() == codes, k


def test_run_speak_and_the_native_runner_speak_an_image_and_a_tone(exported: tuple[Path, list[Path], Thinker],
                                                                  tmp_path: Path) -> None:
    """`omni-edge run --image --audio --speak` (Python) and omni-edge-run (the C ABI) on the omni
    plan: the text on stdout, the speech in the WAV, 2 mel frames (960 samples) per code and the
    3 leading context codes."""
    import wave

    from llm_reference import cli
    from omni_edge.runtime.media import wav_bytes
    from paths import RUN

    out, _, _ = exported
    image_inputs()[0][1].save(tmp_path / "red.png")
    (tmp_path / "tone.wav").write_bytes(wav_bytes(audio_inputs()[0][1], 16000))
    args = ["--plan", str(out / "plan.omni-onnx.json"), "--image", str(tmp_path / "red.png"), "--audio",
            str(tmp_path / "tone.wav"), "--prompt", "What do you see and hear?", "--chat", "--max-new-tokens", "6",
            "--ignore-stop-tokens", "--max-frames", "30", "--json", "--threads", "1"]
    for name, run in (("python", lambda a: cli("run", *a)),
                      ("native", lambda a: subprocess.run([str(RUN), *a], capture_output=True, text=True, timeout=300))):
        wav = tmp_path / f"{name}.wav"
        done = run([*args, "--speak", str(wav)])
        assert done.returncode == 0, (name, done.stderr[-3000:])
        lines = [json.loads(line) for line in done.stdout.splitlines()]
        assert [e["kind"] for e in lines if e["stream"] == "text"] == ["token"] * 6 + ["done"], name
        assert [e["kind"] for e in lines if e["stream"] == "audio"][-1] == "done", name
        with wave.open(str(wav)) as w:
            assert w.getframerate() == 24000 and w.getnframes() == 960 * (30 + 3), name


def test_export_omni_takes_a_checkpoint_or_two_plans_and_refuses_both_or_neither(tmp_path: Path) -> None:
    from llm_reference import cli

    both = cli("export", "omni", "--checkpoint", str(CHECKPOINT), "--thinker-plan", "t.json", "--speech-plan", "s.json",
               "--out", str(tmp_path / "a"))
    neither = cli("export", "omni", "--out", str(tmp_path / "b"))
    not_omni = cli("export", "omni", "--checkpoint", str(CHECKPOINT), "--voice", str(tmp_path / "missing.wav"),
                   "--out", str(tmp_path / "c"))
    assert both.returncode == 2 and "not both" in both.stderr
    assert neither.returncode == 2 and "give --checkpoint" in neither.stderr
    assert not_omni.returncode == 2 and "missing.wav: no such file" in not_omni.stderr


def test_profile_measures_media_and_speech_of_the_omni_plan_together(exported: tuple[Path, list[Path], Thinker],
                                                                     tmp_path: Path) -> None:
    """`omni-edge profile --device host` on plan.omni-onnx.json: an image at the slice graph's
    size and a chirp with every request; each encoder's preprocessing and graph time, TTFT, first
    PCM, RTF and underruns in one report, every component verified on the target."""
    from llm_reference import cli

    out, _, _ = exported
    done = cli("profile", "--device", "host", "--workdir", str(tmp_path / "device"), "--plan",
               str(out / "plan.omni-onnx.json"), "--workload", "short", "--runs", "2", "--warmup", "0", "--threads", "1",
               "--out", str(tmp_path / "profile"))
    assert done.returncode == 0, done.stderr[-3000:]
    report = json.loads((tmp_path / "profile" / "report.json").read_text())
    assert report["kind"] == "omni"
    assert {v["component"] for v in report["verified_on_target"] if v["qualified"]} == {
        "vision-onnx", "audio-onnx", "thinker-onnx", "talker-onnx", "token2wav-onnx"}
    metrics = report["groups"]["concurrency-1"]["metrics"]
    for name in ("image_preprocess_ms", "image_encode_ms", "audio_encode_ms", "ttft_ms", "first_pcm_ms", "rtf",
                 "talker_ms_per_frame", "vocoder_ms"):
        assert metrics[name]["n"] == 2 and metrics[name]["p50"] > 0, name
    assert metrics["underruns"]["n"] == 2
    assert {p["graph"] for p in report["placement"]} >= {"talker_condition", "token2wav_estimator", "token2wav_hift"}


def test_a_matrix_record_of_the_omni_plan_counts_every_stage(exported: tuple[Path, list[Path], Thinker],
                                                            tmp_path: Path) -> None:
    """`matrix record --plan`: every stage's component re-hashed and its reports copied as
    evidence; the omni cell is artifact-ready on the host with a tiny checkpoint (never correct)."""
    from llm_reference import cli

    out, _, _ = exported
    store = tmp_path / "store"
    base = ["matrix", "record", "--store", str(store), "--route", "cpu-wsl", "--family", "omni", "--execution", "host"]
    both = cli(*base, "--plan", str(out / "plan.omni-onnx.json"), "--artifact", str(out / "thinker-onnx"))
    assert both.returncode == 1 and "not both" in both.stderr
    done = cli(*base, "--plan", str(out / "plan.omni-onnx.json"), "--command-line", "pytest")
    assert done.returncode == 0, done.stderr
    record = json.loads(Path(done.stdout.strip()).read_text())
    assert [c["component"] for c in record["artifact"]["components"]] == [
        "vision-onnx", "audio-onnx", "thinker-onnx", "talker-onnx", "token2wav-onnx"]
    assert record["quality"]["qualified"] and len(record["evidence"]) == 1 + 3 * 5
    cells = {(c["route"], c["family"]): c for c in json.loads(cli("matrix", "--json", "--store", str(store)).stdout)}
    cell = cells[("cpu-wsl", "omni")]
    assert cell["status"] == "artifact-ready" and "token2wav-onnx): artifact-ready (on the host), tiny checkpoint" in cell["detail"]


def test_a_block_quantized_thinker_speaks_through_the_other_stages_in_fp32(exported: tuple[Path, list[Path], Thinker],
                                                                          tmp_path: Path) -> None:
    """`--precision int4` on the CPU: the thinker int4 (its own decoder reports), the encoders,
    talker and token2wav fp32, plan.omni-onnx-int4.json; the media request teacher-forced along
    the reference held to the int4 decoder's own greedy limit (measured 0.77 over 64 tokens;
    int8 0.97), and the whole plan speaks."""
    import numpy as np
    from omni_edge.runtime import OmniSession
    from omni_edge.runtime.media import wav_bytes

    out, _, _ = exported
    art = tmp_path / "int4"
    plans = export_checkpoint(out.parent / "checkpoint", art,
                              LlmExportOptions(precision="int4", buckets=(512,), prefill_chunk=32, threads=1))
    assert [p.name for p in plans] == ["plan.onnx-int4.json", "plan.thinker-onnx-int4.json", "plan.talker-onnx.json",
                                       "plan.omni-onnx-int4.json"]
    for component in ("vision-onnx", "audio-onnx", "thinker-onnx-int4", "talker-onnx", "token2wav-onnx"):
        manifest = json.loads((art / component / "manifest.json").read_text())["metadata"]["artifact"]
        assert manifest["numerical_validation"]["passed"] and manifest["task_validation"]["passed"], component
    assert _checks(art / "vision-onnx" / "reports" / "task.json")["media_forced_agreement"] >= 0.7
    image, audio = image_inputs()[0][1], audio_inputs()[0][1]
    image.save(tmp_path / "red.png")
    (tmp_path / "tone.wav").write_bytes(wav_bytes(audio, 16000))
    got = OmniSession.open(plans[-1], threads=1).run(
        "What do you see and hear?", chat=True, media=[("image", str(tmp_path / "red.png")), ("audio", str(tmp_path / "tone.wav"))],
        max_new_tokens=8, ignore_stop_tokens=True, max_frames=60, speech_sampling={"temperature": 0.0, "seed": 1})
    assert len(got.text_events) > 0 and float(np.sqrt(np.mean(got.pcm ** 2))) > 1e-3
