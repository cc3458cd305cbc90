"""The text pipeline end to end against transformers: greedy ids on both backends, full KV
across a bucket boundary and ring KV equal to the checkpoint's sliding window; continuation,
cancellation, sampling, streaming text."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path
from typing import Any

import pytest
from llm_reference import corpus_ids
from numeric import assert_greedy
from omni_edge.runtime import Session
from paths import RUN

PLANS = ["plan.onnx.json", "plan.pte.json"]


def _session_ids(plan: Path, prompt_ids: list[int], n: int, **options: Any) -> tuple[list[int], dict[str, Any]]:
    ids: list[int] = []
    terminal: dict[str, Any] = {}
    session = Session.open(plan)

    def on_event(e: dict[str, Any]) -> bool:
        if e["kind"] == "token":
            ids.extend(e["token_ids"])
        else:
            terminal.update(e)
        return True

    session.run(prompt_ids=prompt_ids, max_new_tokens=n, ignore_stop_tokens=True, on_event=on_event, **options)
    return ids, terminal


@pytest.mark.parametrize("plan", PLANS)
def test_greedy_ids_equal_transformers_across_a_bucket(tiny_checkpoint: Path, tiny_artifact: Path, plan: str) -> None:
    prompt = corpus_ids(tiny_checkpoint, 45)
    got, terminal = _session_ids(tiny_artifact / plan, prompt, 170)  # 45 + 170 positions cross the 128-slot bucket
    assert len(got) == 170
    assert_greedy(got, tiny_checkpoint, prompt, plan)
    assert terminal["kind"] == "done" and terminal["finish_reason"] == "length"
    assert terminal["n_generated_tokens"] == 170 and terminal["context_tokens"] == 45 + 169


@pytest.mark.parametrize("plan", PLANS)
def test_ring_equals_sliding_window_attention(ring_checkpoint: Path, ring_artifact: Path, plan: str) -> None:
    config = json.loads((ring_checkpoint / "config.json").read_text())
    assert config["sliding_window"] == 16 and set(config["layer_types"]) == {"sliding_attention"}
    prompt = corpus_ids(ring_checkpoint, 37)
    got, _ = _session_ids(ring_artifact / plan, prompt, 160)
    assert len(got) == 160
    assert_greedy(got, ring_checkpoint, prompt, plan)


def test_native_cli_prints_the_same_json_lines(tiny_checkpoint: Path, tiny_artifact: Path) -> None:
    prompt = corpus_ids(tiny_checkpoint, 20, offset=3)
    cmd = [str(RUN), "--plan", str(tiny_artifact / "plan.json"), "--prompt-ids", ",".join(map(str, prompt)),
           "--max-new-tokens", "40", "--ignore-stop-tokens", "--json"]
    out = subprocess.run(cmd, capture_output=True, text=True, check=True).stdout.splitlines()
    events = [json.loads(line) for line in out]
    tokens = [t for e in events if e["kind"] == "token" for t in e["token_ids"]]
    assert len(tokens) == 40
    assert_greedy(tokens, tiny_checkpoint, prompt, "omni-edge-run")
    assert [e["seq"] for e in events] == list(range(1, len(events) + 1))
    done = events[-1]
    assert done["kind"] == "done" and done["finish_reason"] == "length"
    for key in ("ttft_ms", "prefill_tok_s", "decode_tok_s", "n_prompt_tokens", "n_generated_tokens", "peak_rss_mb"):
        assert key in done
    assert done["state"]["state_id"] and done["state"]["epoch"] == 0


@pytest.mark.parametrize("plan", PLANS)
def test_continuation_equals_one_shot(tiny_checkpoint: Path, tiny_artifact: Path, plan: str) -> None:
    first, second = corpus_ids(tiny_checkpoint, 30, offset=1), corpus_ids(tiny_checkpoint, 12, offset=2)
    session = Session.open(tiny_artifact / plan)
    turn1: list[int] = []
    turn2: list[int] = []
    session.run(prompt_ids=first, max_new_tokens=25, ignore_stop_tokens=True,
                on_event=lambda e: turn1.extend(e.get("token_ids", [])))
    state1 = session.kv_state()
    history = session.context() + session.pending()
    assert history == first + turn1
    session.run(prompt_ids=second, max_new_tokens=25, ignore_stop_tokens=True, continue_conversation=True,
                on_event=lambda e: turn2.extend(e.get("token_ids", [])))
    assert session.kv_state() == state1, "the same resident state continues"
    one_shot, _ = _session_ids(tiny_artifact / plan, history + second, 25)
    assert turn2 == one_shot and len(turn2) == 25  # one backend, one run: exact
    assert_greedy(turn2, tiny_checkpoint, history + second, plan)


def test_fused_attention_fills_the_last_bucket_to_its_last_slot(tiny_checkpoint: Path, tiny_artifact: Path) -> None:
    """The ONNX plan attends with the fused kernel, which writes a prefill chunk's padding rows
    into the cache too: a turn starting at position 244 of the 256-slot bucket cannot go as a
    16-row chunk, so it goes token by token, and the conversation runs to the bucket's last slot."""
    plan = tiny_artifact / "plan.onnx.json"
    assert json.loads(plan.read_text())["stages"][0]["llm"]["kv"]["attention"] == "fused"
    first, second = corpus_ids(tiny_checkpoint, 235, offset=3), corpus_ids(tiny_checkpoint, 5, offset=4)
    session = Session.open(plan)
    turn1: list[int] = []
    turn2: list[int] = []
    session.run(prompt_ids=first, max_new_tokens=10, ignore_stop_tokens=True,
                on_event=lambda e: turn1.extend(e.get("token_ids", [])))
    history = session.context() + session.pending()
    assert len(session.context()) == 244
    session.run(prompt_ids=second, max_new_tokens=6, ignore_stop_tokens=True, continue_conversation=True,
                on_event=lambda e: turn2.extend(e.get("token_ids", [])))
    assert len(history + second) + len(turn2) - 1 == 255 and len(turn2) == 6  # the last token written to slot 255
    assert_greedy(turn2, tiny_checkpoint, history + second, "fused, to the last slot")


def test_chat_continuation_formats_chatml(tiny_artifact: Path) -> None:
    session = Session.open(tiny_artifact / "plan.json")
    session.run("Hello there", chat=True, max_new_tokens=5, on_event=lambda e: True)
    history = session.context() + session.pending()
    expected_prompt = session.tokenize("<|im_start|>user\nHello there<|im_end|>\n<|im_start|>assistant\n")
    assert history[:len(expected_prompt)] == expected_prompt
    session.run("And then?", chat=True, continue_conversation=True, max_new_tokens=5, on_event=lambda e: True)
    closing = [] if history[-1] == session.tokenize("<|im_end|>")[0] else session.tokenize("<|im_end|>")
    turn = session.tokenize("\n<|im_start|>user\nAnd then?<|im_end|>\n<|im_start|>assistant\n")
    assert session.context()[:len(history) + len(closing) + len(turn)] == history + closing + turn


@pytest.mark.parametrize("plan", PLANS)
def test_cancel_at_the_next_token_leaves_the_session_usable(tiny_checkpoint: Path, tiny_artifact: Path, plan: str) -> None:
    prompt = corpus_ids(tiny_checkpoint, 20, offset=4)
    session = Session.open(tiny_artifact / plan)
    events: list[dict[str, Any]] = []

    def stop_after_five(e: dict[str, Any]) -> bool:
        events.append(e)
        return len(events) < 5

    metrics = session.run(prompt_ids=prompt, max_new_tokens=100, ignore_stop_tokens=True, on_event=stop_after_five)
    assert [e["kind"] for e in events] == ["token"] * 5 + ["cancelled"], "nothing after the cancel but its terminal event"
    assert events[-1]["finish_reason"] == "cancelled" and events[-1]["state"]
    seqs = [e["seq"] for e in events]
    assert seqs == sorted(set(seqs)), "delivered in order, never twice"
    shown = [t for e in events for t in e.get("token_ids", [])]
    assert metrics["n_generated_tokens"] == 5
    assert session.context() + session.pending() == prompt + shown, "the context is what the consumer saw"
    fresh, done = _session_ids(tiny_artifact / plan, prompt, 30)
    assert done["kind"] == "done" and len(fresh) == 30
    assert_greedy(fresh, tiny_checkpoint, prompt, plan)
    events.clear()
    session.run(prompt_ids=prompt, max_new_tokens=30, ignore_stop_tokens=True, on_event=lambda e: events.append(e) or True)
    assert [t for e in events if e["kind"] == "token" for t in e["token_ids"]] == fresh


def test_sampling_is_seeded_and_deterministic(tiny_artifact: Path) -> None:
    session = Session.open(tiny_artifact / "plan.json")

    def sample(seed: int, **kw: Any) -> list[int]:
        out: list[int] = []
        session.run("The", max_new_tokens=40, ignore_stop_tokens=True, on_event=lambda e: out.extend(e.get("token_ids", [])),
                    sampling={"temperature": 0.9, "top_k": 50, "top_p": 0.95, "seed": seed, **kw})
        return out

    a, b, c = sample(1), sample(1), sample(2)
    assert a == b and a != c
    greedy: list[int] = []
    session.run("The", max_new_tokens=40, ignore_stop_tokens=True, on_event=lambda e: greedy.extend(e.get("token_ids", [])))
    assert sample(3, top_k=1) == greedy
    assert sample(4, min_p=0.999) == greedy
    with pytest.raises(Exception, match="invalid_sampling"):
        sample(5, top_p=0.0)


def test_streamed_text_is_whole_utf8_and_stops_at_stop_strings(tiny_artifact: Path) -> None:
    session = Session.open(tiny_artifact / "plan.json")
    deltas: list[str] = []
    ids: list[int] = []

    def collect(e: dict[str, Any]) -> bool:
        if e["kind"] == "token":
            deltas.append(e["text"])
            ids.extend(e["token_ids"])
        return True

    session.run("東京 🚀 naïve", max_new_tokens=60, ignore_stop_tokens=True, on_event=collect,
                sampling={"temperature": 1.5, "seed": 11})
    for d in deltas:
        d.encode("utf-8")  # every delta is a whole string (no surrogates, no split characters)
    from tokenizers import Tokenizer
    tok = Tokenizer.from_file(str(tiny_artifact / "thinker-onnx" / "tokenizer.json"))
    assert "".join(deltas) == tok.decode(ids, skip_special_tokens=True)

    text = "".join(deltas)
    stop = next((text[i:i + 3] for i in range(len(text) // 2, len(text) - 3) if text[i:i + 3].strip()), None)
    if stop:
        deltas.clear()
        terminal: dict[str, Any] = {}
        session.run("東京 🚀 naïve", max_new_tokens=60, ignore_stop_tokens=True, stop_strings=[stop],
                    on_event=lambda e: collect(e) if e["kind"] == "token" else terminal.update(e) or True,
                    sampling={"temperature": 1.5, "seed": 11})
        assert terminal["finish_reason"] == "stop_string"
        assert stop not in "".join(deltas) and text.startswith("".join(deltas))


def test_abort_fences_the_epoch_and_the_next_request_starts_fresh(tiny_checkpoint: Path, tiny_artifact: Path) -> None:
    import threading

    from omni_edge.contracts import ContractError

    prompt = corpus_ids(tiny_checkpoint, 20, offset=5)
    session = Session.open(tiny_artifact / "plan.json")
    session.run(prompt_ids=prompt, max_new_tokens=5, on_event=lambda e: True)
    assert session.epoch == 0 and session.kv_state()["epoch"] == 0
    seen: list[dict[str, Any]] = []
    gate = threading.Event()

    def slow(e: dict[str, Any]) -> bool:
        seen.append(e)
        if len(seen) == 3:
            threading.Thread(target=session.abort).start()
            gate.wait(2)  # the abort lands while this consumer is still busy
        return True

    with pytest.raises(ContractError, match="aborted"):
        session.run(prompt_ids=[7, 8, 9], continue_conversation=True, max_new_tokens=200, ignore_stop_tokens=True,
                    on_event=slow)
    assert len(seen) <= 4 and all(e["kind"] == "token" for e in seen), "nothing stale after the fence, no terminal"
    assert session.epoch == 1 and session.kv_state() is None and session.context() == []
    with pytest.raises(ContractError, match="no_conversation"):
        session.run(prompt_ids=[1], continue_conversation=True, on_event=lambda e: True)
    ids, _ = _session_ids(tiny_artifact / "plan.json", prompt, 20)
    again: list[int] = []
    session.run(prompt_ids=prompt, max_new_tokens=20, ignore_stop_tokens=True,
                on_event=lambda e: again.extend(e.get("token_ids", [])) or True)
    assert again == ids and len(ids) == 20
    assert_greedy(ids, tiny_checkpoint, prompt)
    assert session.kv_state()["epoch"] == 1, "the new conversation's state is bound to the new epoch"


def test_full_cache_rings_past_the_last_bucket_when_the_plan_says_so(tiny_checkpoint: Path, tmp_path: Path) -> None:
    """kv.overflow = ring: past the largest bucket (128) the cache slides a window of 128, which is
    transformers with a 128-token sliding window on the same weights."""
    import torch
    from omni_edge.export.options import LlmExportOptions
    from omni_edge.export.registry import export_checkpoint
    from transformers import AutoModelForCausalLM

    artifact = tmp_path / "overflow"
    export_checkpoint(tiny_checkpoint, artifact, LlmExportOptions(formats=("onnx",), prefill_chunk=16, buckets=(64, 128),
                                                           overflow="ring"))
    prompt = corpus_ids(tiny_checkpoint, 40, offset=6)
    got, done = _session_ids(artifact / "plan.json", prompt, 150)
    model = AutoModelForCausalLM.from_pretrained(str(tiny_checkpoint), dtype=torch.float32)
    model.config.use_sliding_window, model.config.sliding_window = True, 128
    model.config.layer_types = ["sliding_attention"] * model.config.num_hidden_layers
    model = AutoModelForCausalLM.from_pretrained(str(tiny_checkpoint), config=model.config, dtype=torch.float32).eval()
    assert done["context_tokens"] == 40 + 149 > 128 and len(got) == 150
    assert_greedy(got, model, prompt, "ring past the last bucket")
