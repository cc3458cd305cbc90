"""The Qwen3.5 hybrid (Gated DeltaNet + gated attention) on an unseen tiny checkpoint (random
weights, the architecture's features at test size): greedy ids equal transformers' for 300 tokens
across prefill-chunk and bucket boundaries and a second turn, on ONNX Runtime and ExecuTorch; the
w8a16 HTP export runs on the emulator with every graph on the NPU; a cancelled request's recurrent
state equals that of one that stopped there; every way back to an earlier position gives the state
the model had there; plans that would not be the model are refused by name."""

from __future__ import annotations

import json
import time
from dataclasses import replace
from pathlib import Path

import numpy as np
import pytest
from numeric import assert_greedy
from session_once import made_once

PROMPT = " ".join(f"line {i}: the value of x is {i * i}" for i in range(40))
FOLLOW_UP = " and then the next value of y is"


@pytest.fixture(scope="session")
def hybrid(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path]:
    """(checkpoint, artifact): prefill chunks of 16; ONNX over buckets 128/256/512, ExecuTorch over
    512 alone (its XNNPACK lowering of the hybrid takes about a minute a bucket here)."""
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint, make_checkpoint

    def make(work: Path) -> None:
        make_checkpoint(work / "ckpt", arch="qwen3.5", preset="tiny", seed=3)
        for fmt, buckets in (("onnx", (128, 256, 512)), ("pte", (512,))):
            export_checkpoint(work / "ckpt", work / "artifact",
                              LlmExportOptions(formats=(fmt,), prefill_chunk=16, buckets=buckets))

    work = made_once(tmp_path_factory, "qwen3_5-tiny", make)
    return work / "ckpt", work / "artifact"


@pytest.fixture(scope="session")
def hybrid_htp(hybrid: tuple[Path, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The same checkpoint as w8a16 context binaries for the X Elite's HTP (bucket 128, chunks of
    8: the token-by-token prefill graph's size sets the quantizer's time), validated by the export
    on the emulator against transformers."""
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint

    def make(work: Path) -> None:
        export_checkpoint(hybrid[0], work / "artifact", LlmExportOptions(
            target="qnn-htp", precision="w8a16", socs=("x-elite",), prefill_chunk=8, buckets=(128,)))

    return made_once(tmp_path_factory, "qwen3_5-tiny-htp", make) / "artifact"


def _ids(checkpoint: Path, text: str, n: int) -> list[int]:
    from tokenizers import Tokenizer

    ids: list[int] = Tokenizer.from_file(str(checkpoint / "tokenizer.json")).encode(text).ids
    assert len(ids) >= n
    return ids[:n]


def _last(session: object) -> dict:
    stages = session.info()["stages"]  # type: ignore[attr-defined]
    return dict(stages[0]["last_request"])


@pytest.mark.parametrize("fmt", ["onnx", "pte"])
def test_greedy_ids_equal_transformers_across_chunks_buckets_and_turns(hybrid: tuple[Path, Path], fmt: str) -> None:
    from omni_edge.runtime import Session

    checkpoint, artifact = hybrid
    session = Session.open(artifact / f"plan.{fmt}.json")
    first, second = _ids(checkpoint, PROMPT, 61), _ids(checkpoint, FOLLOW_UP, 9)  # 61 = 3 chunks of 16 and 13
    turns: list[list[int]] = []
    context: list[int] = []
    for prompt, n, more in ((first, 150, False), (second, 150, True)):
        got: list[int] = []
        done = session.run(prompt_ids=prompt, max_new_tokens=n, ignore_stop_tokens=True, continue_conversation=more,
                           on_event=lambda e, got=got: got.extend(e.get("token_ids", [])) or True)
        context += prompt
        assert len(got) == n
        # Each turn against transformers after everything before it; the second crosses 256.
        assert_greedy(got, checkpoint, context, f"{fmt} turn {len(turns) + 1}")
        context += got
        turns.append(got)
    assert done["context_tokens"] == len(context) - 1  # the last sampled token is not fed yet
    assert _last(session)["recurrent"]["position"] == len(context) - 1
    info = json.loads((artifact / f"thinker-{fmt}" / "manifest.json").read_text())
    assert info["metadata"]["artifact"]["state_layout_version"] == 2


def test_the_w8a16_htp_export_runs_on_the_npu_as_transformers_does(hybrid: tuple[Path, Path], hybrid_htp: Path) -> None:
    """Every graph (the prefill chunk runs the delta rule token by token) compiled for the HTP and
    run on the emulator: the export's reports against transformers pass their limits, the states
    cross as float with one range each, and a free run through `omni-edge run` places every graph
    on the NPU with nothing elsewhere and answers transformers' greedy ids up to the noise the
    measured SQNR allows."""
    from llm_reference import cli
    from omni_edge.export.comparison import quantized_tie_gap
    from omni_edge.export.decoder.qnn import QUANTIZED_LIMITS

    checkpoint = hybrid[0]
    component = hybrid_htp / "thinker-qnn-x-elite-w8a16"
    manifest = json.loads((component / "manifest.json").read_text())["metadata"]
    assert manifest["artifact"]["state_layout_version"] == 2
    state_io = manifest["qnn"]["recurrent_state_io"]
    assert state_io["dtype"] == "float32" and len(state_io["ranges_inside"]) == 2 * 6
    assert all(lo < 0 < hi for lo, hi in state_io["ranges_inside"].values())
    reports = {kind: {c["name"]: c for c in json.loads((component / "reports" / f"{kind}.json").read_text())["checks"]}
               for kind in ("numerical", "task")}
    limits = QUANTIZED_LIMITS["w8a16"]
    for kind, name in (("numerical", "logit_sqnr_db"), ("numerical", "top1_agreement"), ("task", "greedy_agreement_64")):
        assert reports[kind][name]["observed"] >= limits[name], reports[kind][name]
    prompt = _ids(checkpoint, PROMPT, 37)  # four chunks of 8 and 5
    done = cli("run", "--plan", str(hybrid_htp / "plan.json"), "--prompt-ids", ",".join(map(str, prompt)),
               "--max-new-tokens", "40", "--ignore-stop-tokens", "--json", "--info", timeout=600)
    assert done.returncode == 0, done.stderr[-3000:]
    got = [t for line in done.stdout.splitlines() for t in json.loads(line).get("token_ids", [])]
    placements = json.JSONDecoder().raw_decode(done.stderr[done.stderr.index('{\n "placements"'):])[0]["placements"]
    assert {p["graph"] for p in placements} == {"embed_chunk", "embed_step", "prefill_s128", "decode_s128", "lm_head"}
    assert all(p["device"] == "npu" and p["engine"] == "QNNExecutionProvider" and p["nodes_elsewhere"] == 0
               for p in placements)
    logits = _transformers_logits(checkpoint, prompt + got)
    tie_gap = quantized_tie_gap(float(np.sqrt(np.mean(logits ** 2))), limits["logit_sqnr_db"])
    assert len(got) == 40
    assert_greedy(got, checkpoint, prompt, "w8a16 on the HTP emulator", tie_gap=tie_gap)


def _transformers_logits(checkpoint: Path, ids: list[int]) -> np.ndarray:
    import torch
    from omni_edge.export.decoder.causal_lm import load_causal_lm

    model = load_causal_lm(checkpoint, ("qwen3_5_text", "qwen3_5"))
    with torch.no_grad():
        return model(torch.tensor([ids])).logits[0].numpy().astype(np.float64)


# Qwen3.5's image fields (its processor is Qwen3VLProcessor over Qwen2VLImageProcessorPil): patches
# of 16 merged 2x2, mean and std 0.5, and the pixel range given only as `size`.
QWEN35_PREPROCESSOR = {"size": {"shortest_edge": 65536, "longest_edge": 16777216}, "patch_size": 16,
                       "temporal_patch_size": 2, "merge_size": 2, "image_mean": [0.5] * 3, "image_std": [0.5] * 3}


def test_native_image_preprocessing_reads_qwen3_5s_config_as_its_processor_does() -> None:
    """The controller's preprocessing under Qwen3.5's config against transformers' image
    processor built from the same fields, on a real photograph as it is (512x600: resampled to
    multiples of 32), stretched, and cropped small (enlarged to at least `size.shortest_edge`
    pixels): the same grid and the same patches, bit for bit."""
    from minicpmo45_media import photo
    from omni_edge.runtime.media import preprocess_image
    from PIL import Image
    from transformers import Qwen2VLImageProcessorPil

    processor = Qwen2VLImageProcessorPil(**QWEN35_PREPROCESSOR)
    hopper = photo()
    assert isinstance(hopper, Image.Image)
    for image in (hopper, hopper.resize((900, 300), Image.Resampling.BICUBIC), hopper.crop((100, 100, 220, 190))):
        ref = processor(images=[image], return_tensors="np")
        got, grid = preprocess_image(np.asarray(image), QWEN35_PREPROCESSOR)
        assert grid == tuple(int(v) for v in ref["image_grid_thw"][0])
        assert grid[1] * grid[2] * 16 * 16 >= 65536
        np.testing.assert_array_equal(got, ref["pixel_values"])


def test_native_mrope_positions_are_qwen3_5s_get_rope_index() -> None:
    """A prompt with two images of different grids between text, in Qwen3.5's config naming
    (`image_token_id`, no audio): the controller's three position rows and where generation
    continues, against transformers' Qwen3_5Model.get_rope_index on the same ids and grids."""
    import torch
    from omni_edge.runtime.media import mrope_positions
    from transformers import Qwen3_5Config, Qwen3_5Model

    config = Qwen3_5Config(
        text_config=dict(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                         num_key_value_heads=1, head_dim=32, linear_num_key_heads=1, linear_num_value_heads=2,
                         linear_key_head_dim=16, linear_value_head_dim=16, vocab_size=512),
        vision_config=dict(depth=1, hidden_size=32, num_heads=2, intermediate_size=64, out_hidden_size=64,
                           num_position_embeddings=64),
        image_token_id=500, vision_start_token_id=501, vision_end_token_id=502, video_token_id=503)
    model = Qwen3_5Model(config).eval()
    grids = [(1, 4, 6), (1, 8, 2)]  # patches before the 2x2 merge: 6 and 4 placeholders
    ids = [7, 8, 501, *[500] * 6, 502, 9, 10, 11, 501, *[500] * 4, 502, 12]
    input_ids = torch.tensor([ids])
    ref, delta = model.get_rope_index(input_ids, (input_ids == 500).int(), torch.tensor(grids))
    rows, next_position = mrope_positions(ids, config.to_dict(), grids)
    np.testing.assert_array_equal(rows, ref[:, 0].numpy())
    assert next_position == int(ref.max()) + 1 == len(ids) + int(delta[0])
    assert (rows[1] != rows[2]).any()  # the images are not at text positions
    with pytest.raises(ValueError, match="needs 4 consecutive"):
        mrope_positions(ids[:-3], config.to_dict(), grids)


def test_the_body_rotates_an_image_prompts_rows_as_qwen3_5_does() -> None:
    """The hybrid body with Qwen3.5's interleaved M-RoPE (frequencies T H W T H W ..., over half of
    each head) against transformers' text model on the same three position rows of a prompt with
    an image's grid in it; the contiguous (Qwen2-VL) assignment of the same section does not
    match, so the rows are really told apart."""
    import torch
    from omni_edge.export.decoder.graphs import BodyGraph, DecoderShape, image_rope
    from transformers import Qwen3_5ForCausalLM, Qwen3_5TextConfig

    config = Qwen3_5TextConfig(hidden_size=64, intermediate_size=128, num_hidden_layers=4, num_attention_heads=2,
                               num_key_value_heads=1, head_dim=64, linear_num_key_heads=1, linear_num_value_heads=2,
                               linear_key_head_dim=16, linear_value_head_dim=16, vocab_size=256,
                               rope_parameters={"rope_type": "default", "rope_theta": 10000.0, "partial_rotary_factor": 0.5,
                                                "mrope_section": [6, 5, 5], "mrope_interleaved": True})
    torch.manual_seed(0)
    model = Qwen3_5ForCausalLM(config).eval()
    shape = image_rope(DecoderShape.from_config(config), config)
    # text 0-2, a 2x3 merged image at 3 (rows t, h, w), text from 6 on.
    rows = [[0, 1, 2, 3, 3, 3, 3, 3, 3, 6, 7, 8], [0, 1, 2, 3, 3, 3, 4, 4, 4, 6, 7, 8], [0, 1, 2, 3, 4, 5, 3, 4, 5, 6, 7, 8]]
    positions = torch.tensor(rows)[:, None]
    n, cache = positions.shape[-1], 16
    ids = torch.randint(0, 256, (1, n))
    mask = torch.full((1, 1, n, cache + n), -10000.0)
    mask[0, 0, :, cache:] = torch.triu(torch.full((n, n), -10000.0), diagonal=1)
    conv, state = shape.linear.state_shapes()  # type: ignore[union-attr]
    past = [torch.zeros(1, 1, 64, cache), torch.zeros(1, 1, cache, 64), *[torch.zeros(conv)] * 3, *[torch.zeros(state)] * 3,
            torch.tensor([n])]
    with torch.no_grad():
        ref = model.model(input_ids=ids, position_ids=positions).last_hidden_state
        hidden = model.model.embed_tokens(ids)
        for interleaved, close in ((True, True), (False, False)):
            body = BodyGraph(model, replace(shape, mrope_interleaved=interleaved)).eval()
            got = model.model.norm(body(hidden, positions, mask, *past)[0])
            assert torch.allclose(got, ref, atol=1e-5) == close, float((got - ref).abs().max())


@pytest.mark.parametrize("grid", [(1, 4, 6), (2, 6, 4)])
def test_the_vision_graph_is_qwen3_5s_tower(grid: tuple[int, int, int]) -> None:
    """The static vision graph of a grid (resampled position embeddings, 2-D rotary and per-frame
    attention as constants) against transformers' Qwen3_5VisionModel on random patches: an image,
    and two frames that must not attend to each other."""
    import torch
    from omni_edge.export.models.qwen3_5.vision import VisionGraph
    from transformers import Qwen3_5Config, Qwen3_5Model

    config = Qwen3_5Config(text_config=dict(hidden_size=64, num_hidden_layers=4, vocab_size=256),
                           vision_config=dict(depth=2, hidden_size=64, num_heads=2, intermediate_size=96,
                                              out_hidden_size=64, num_position_embeddings=36))
    torch.manual_seed(0)
    visual = Qwen3_5Model(config).visual.eval()
    patches = torch.randn(grid[0] * grid[1] * grid[2], 3 * 2 * 16 * 16)
    with torch.no_grad():
        ref = visual(patches, grid_thw=torch.tensor([grid])).pooler_output
        got = VisionGraph(visual, grid).eval()(patches)
    assert got.shape == ref.shape == (grid[0] * grid[1] * grid[2] // 4, 64)
    torch.testing.assert_close(got, ref, rtol=0, atol=1e-5)


def test_a_cancelled_request_keeps_the_state_of_one_that_stopped_there(hybrid: tuple[Path, Path]) -> None:
    """The consumer stops after 12 tokens while the worker has run ahead: the withheld tokens leave
    the context, and the recurrent state (which cannot be rewound by position) is the one a request
    of 12 tokens leaves, bit for bit (restored from the history or re-run by decode steps from the
    prompt's saved state); the next turn then answers alike."""
    from omni_edge.runtime import Session

    checkpoint, artifact = hybrid
    plan, prompt = artifact / "plan.onnx.json", _ids(checkpoint, PROMPT, 40)
    stopped = Session.open(plan)
    stopped.run(prompt_ids=prompt, max_new_tokens=12, ignore_stop_tokens=True, on_event=lambda e: True)
    cancelled = Session.open(plan)
    seen: list[int] = []

    def stop_at_12(event: dict) -> bool:
        if not seen:
            time.sleep(1.0)  # a slow reader: the worker runs ahead, so the cancel withholds tokens
        seen.extend(event.get("token_ids", []))
        return len(seen) < 12

    cancelled.run(prompt_ids=prompt, max_new_tokens=200, ignore_stop_tokens=True, on_event=stop_at_12)
    a, b = _last(stopped), _last(cancelled)
    assert len(seen) == 12 and a["context"] == b["context"] and a["pending"] == b["pending"]
    assert a["recurrent"]["sha256"] == b["recurrent"]["sha256"] and a["recurrent"]["position"] == 40 + 11
    assert b["recurrent"]["last_rewind"], "nothing was withheld: the test did not rewind"
    follow = _ids(checkpoint, FOLLOW_UP, 9)
    answers = []
    for session in (stopped, cancelled):
        got: list[int] = []
        session.run(prompt_ids=follow, max_new_tokens=20, ignore_stop_tokens=True, continue_conversation=True,
                    on_event=lambda e, got=got: got.extend(e.get("token_ids", [])) or True)
        answers.append(got)
    assert answers[0] == answers[1] and len(answers[0]) == 20


def test_every_way_back_gives_the_state_the_model_had_there(hybrid: tuple[Path, Path]) -> None:
    """Decoder-level rewinds: within the state history (no copy), past it to the state saved after
    the prompt and forward by decode steps (the same graph as the first time: equal bytes), and
    into the prompt (replayed: equal to rounding)."""
    from omni_edge._native import LlmEngine

    checkpoint, artifact = hybrid
    engine = LlmEngine.open(str(artifact / "plan.onnx.json"))
    prompt = _ids(checkpoint, PROMPT, 40)
    logits = np.frombuffer(engine.feed(prompt), np.float32)
    context, states = list(prompt), {40: engine.recurrent_state()}
    for _ in range(10):
        context.append(int(logits.argmax()))
        logits = np.frombuffer(engine.feed(context[-1:]), np.float32)
        states[len(context)] = engine.recurrent_state()
    assert engine.position == 50
    # 48 is still in the history; 43 is not: from the state after the prompt, three decode steps;
    # those left 41 in the history.
    for position, how in ((48, "history"), (43, "replay 3"), (41, "history")):
        engine.rewind(position, context)
        assert engine.last_rewind == how and engine.position == position
        assert engine.recurrent_state() == states[position], how
        engine.feed(context[position:position + 1])  # on again by one decode step: the same bytes
        assert engine.recurrent_state() == states[position + 1], how
    engine.rewind(30, context)  # inside the prompt: fed again from the start
    assert engine.last_rewind == "refeed" and engine.position == 30
    engine.feed(context[30:40])
    replayed = np.frombuffer(engine.recurrent_state(), np.float32)
    np.testing.assert_allclose(replayed, np.frombuffer(states[40], np.float32), rtol=0, atol=1e-5)
    with pytest.raises(Exception, match="cannot rewind"):
        engine.rewind(41, context)


def test_plans_that_would_not_be_the_model_are_refused(hybrid: tuple[Path, Path], tmp_path: Path) -> None:
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint
    from omni_edge.runtime import Session

    checkpoint, artifact = hybrid
    for kv in ({"kv": "ring", "window": 64}, {"overflow": "ring"}):
        with pytest.raises(ValueError, match="attend to every position"):
            export_checkpoint(checkpoint, tmp_path / "no", LlmExportOptions(formats=("onnx",), **kv))  # type: ignore[arg-type]
    plan = json.loads((artifact / "plan.onnx.json").read_text())
    llm = plan["stages"][0]["llm"]
    cases = [("kv", {**llm["kv"], "overflow": "ring", "attention": "masked"}, "attend to every position"),
             ("recurrent", {**llm["recurrent"], "history": 1}, "history: must be >= 2"),
             ("recurrent", {**llm["recurrent"], "conv_state": [160]}, "conv_state: expected 2 dimensions"),
             ("recurrent", {**llm["recurrent"], "layers": 5}, "graph_mismatch"),
             ("recurrent", {**llm["recurrent"], "recurrent_state": [4, 16, 16]}, r"recurrent_state_0\) is float32\[1, 4, 16, 24\]")]
    for field, value, message in cases:
        broken = json.loads(json.dumps(plan))
        broken["stages"][0]["llm"][field] = value
        path = artifact / f"broken-{len(message)}.json"
        path.write_text(json.dumps(broken))
        try:
            with pytest.raises(Exception, match=message):
                Session.open(path)
        finally:
            path.unlink()
