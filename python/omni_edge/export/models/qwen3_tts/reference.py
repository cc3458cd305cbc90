"""Qwen3-TTS-shaped speech model, built from transformers' architecture code, and its reference
(offline and streaming) decoding in PyTorch.

Three stages, at 12.5 frames per second, 16 codebooks per frame, 24 kHz audio:
  talker          a Qwen3 decoder (transformers `Qwen3Model`). Its input at frame t is the
                  projected text embedding plus the sum of the 16 codebook embeddings of frame
                  t-1; `codec_head` on its last hidden state gives codebook 0 of frame t.
  code predictor  transformers' Qwen3-Omni talker code predictor (a small Qwen3 decoder with 15
                  codebook embeddings and 15 heads): from [talker hidden, embedding of code 0] it
                  predicts codebooks 1..15 of the frame, one after another.
  vocoder         codes [16, T] -> T x 1920 samples, causal (a prefix of the codes decodes to a
                  prefix of the audio): either a Qwen3-TTS release's 12 Hz codec decoder
                  (`qwen3_tts_codec`, every sample final when its frame is decoded) or
                  transformers' Qwen3-Omni Code2Wav (a constant delay of `tail_samples` samples
                  that only a following frame releases).

Checkpoint directory: config.json (model_type "qwen3_tts": talker, code predictor and vocoder
configs, codec ids), model.safetensors (talker.* and talker.code_predictor.*), tokenizer.json,
and speech_tokenizer/ with the vocoder's config.json + model.safetensors, as Qwen3-TTS lays out
its speech tokenizer.

A Qwen3-TTS release (Qwen3-TTS-12Hz-0.6B/1.7B, CustomVoice / VoiceDesign / Base) loads as it is:
its talker_config (no "decoder" section) maps onto the same modules (`qwen3_tts_release`),
its weights (bfloat16) load under the release's names, its Qwen2 tokenizer (vocab.json +
merges.txt) converts to a tokenizer.json, and its speech_tokenizer/ is the 12 Hz codec decoder.
What differs from the local layout is data, not structure:
  - codebook 0 has a 3072-id vocabulary with the special ids (pad, bos, eos, think tags,
    languages, speakers) inside it; ids past the codebook but eos are never spoken, and eos not
    before `min_frames` (2) frames;
  - the prompt (`Prompt`): text-only rows for the chat role (and an instruction), then text-pad
    rows beside the think / language / speaker codec ids, the text bos beside the codec pad, each
    text token beside the codec pad, the text eos beside the codec pad, and the text pad beside
    the codec bos (generate()'s non-streaming prompt); every frame after reads the text pad.
    Streaming the text (`Voice.stream_text`), only the first text token is in the prompt,
    beside the codec bos; the frames read the rest, then the text eos, one each;
  - interleaved multimodal RoPE whose three position rows are equal for speech: 1-D RoPE;
  - a code predictor narrower than the talker (1.7B) reads its inputs through
    `small_to_mtp_projection`;
  - sampling defaults from generation_config.json (repetition penalty on codebook 0).
Voice cloning (a speaker embedding from reference audio) is not supported.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np
import torch
from torch import nn

from omni_edge.export.comparison import Agreement, compare_greedy, flatten_codes, top2_gap
from omni_edge.export.models.qwen3_tts import codec
from omni_edge.export.speech import StreamShape, Voice
from omni_edge.runtime.request import GREEDY_BELOW
from omni_edge.runtime.request import Sampling as Sampling  # the reference decodes as a request says

GREEDY = Sampling()  # the reference's default decoding
CODE_GROUPS = 16
FRAME_RATE = 12.5
SAMPLE_RATE = 24_000
SAMPLES_PER_FRAME = 1920  # SAMPLE_RATE / FRAME_RATE: the vocoder's total upsampling
MODEL_TYPE = "qwen3_tts"
VOCODER_DIR = "speech_tokenizer"


ABSENT = -1  # a prompt row without a codec id (text only)


@dataclass(frozen=True)
class CodecIds:
    """Codebook 0: `codebook_size` codes, then (up to `vocab`) special ids, some named here."""

    codebook_size: int
    pad: int
    bos: int
    eos: int
    vocab: int

    @classmethod
    def after_codebook(cls, codebook_size: int) -> CodecIds:
        """The local layout: pad, bos, eos right after the codebook."""
        return cls(codebook_size, codebook_size, codebook_size + 1, codebook_size + 2, codebook_size + 3)


@dataclass(frozen=True)
class Prompt:
    """The talker's prefix around the text: `head` rows, each text token beside `text_codec`,
    then `tail` rows; every frame after reads `frame_text`. A row is (text id, codec id of
    codebook 0, or ABSENT).

    With `stream_text`, only the first text token is in the prefix (beside `text_codec`); the
    others, then `text_end`, are read one per frame (frame t's input carries text token t + 1)
    before `frame_text`: speech starts after one text token (a release's streaming text mode)."""

    head: tuple[tuple[int, int], ...]
    text_codec: int
    tail: tuple[tuple[int, int], ...]
    frame_text: int
    stream_text: bool = False
    text_end: int = ABSENT

    def rows(self, text_ids: list[int]) -> list[tuple[int, int]]:
        if self.stream_text and not text_ids:
            raise ValueError("a streamed-text prompt needs at least one text token")
        inline = text_ids[:1] if self.stream_text else text_ids
        return [*self.head, *((t, self.text_codec) for t in inline), *self.tail]

    def frame_texts(self, text_ids: list[int]) -> list[int]:
        """Text ids the frames read before `frame_text`: frame t's input reads entry t."""
        if not self.stream_text:
            return []
        return [*text_ids[1:], *([self.text_end] if self.text_end != ABSENT else [])]

    def frame_inputs(self, text_ids: list[int], frames: int) -> list[int]:
        """The text id the input after each of `frames` frames reads (entry t: after frame t)."""
        queued = self.frame_texts(text_ids)[:frames]
        return queued + [self.frame_text] * (frames - len(queued))

    def to_json(self) -> dict[str, Any]:
        out = {"head": [list(r) for r in self.head], "text_codec": self.text_codec,
               "tail": [list(r) for r in self.tail], "frame_text": self.frame_text}
        return {**out, "stream_text": True, "text_end": self.text_end} if self.stream_text else out


class TextProjection(nn.Module):
    """Text embedding width -> talker width (two linears with SiLU, as Qwen3-TTS's resize MLP)."""

    def __init__(self, text_hidden: int, hidden: int) -> None:
        super().__init__()
        self.linear_fc1 = nn.Linear(text_hidden, text_hidden)
        self.linear_fc2 = nn.Linear(text_hidden, hidden)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.linear_fc2(torch.nn.functional.silu(self.linear_fc1(x)))
        return out


class Talker(nn.Module):
    def __init__(self, config: dict[str, Any]) -> None:
        from transformers import Qwen3Config, Qwen3Model
        from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import (
            Qwen3OmniMoeTalkerCodePredictorConfig,
        )
        from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import (
            Qwen3OmniMoeTalkerCodePredictorModelForConditionalGeneration,
        )

        super().__init__()
        decoder = Qwen3Config(**config["decoder"])
        size = int(config["codebook_size"])
        if "codec_ids" in config:  # a release's: special ids anywhere past the codebook
            named = config["codec_ids"]
            self.ids = CodecIds(size, int(named["pad"]), int(named["bos"]), int(named["eos"]), int(decoder.vocab_size))
        else:
            self.ids = CodecIds.after_codebook(size)
        if decoder.vocab_size != self.ids.vocab:
            raise ValueError(f"talker decoder.vocab_size must be codebook_size + 3 = {self.ids.vocab}")
        if not all(size <= i < self.ids.vocab for i in (self.ids.pad, self.ids.bos, self.ids.eos)):
            raise ValueError(f"codec pad/bos/eos must lie past the codebook, inside the vocabulary [{size}, {self.ids.vocab})")
        self.model: Any = Qwen3Model(decoder)  # embed_tokens: the embedding of codebook 0 (with its special ids)
        self.text_embedding = nn.Embedding(int(config["text_vocab_size"]), int(config["text_hidden_size"]))
        self.text_projection = TextProjection(int(config["text_hidden_size"]), decoder.hidden_size)
        self.codec_head = nn.Linear(decoder.hidden_size, self.ids.vocab, bias=False)
        predictor = Qwen3OmniMoeTalkerCodePredictorConfig(**config["code_predictor"])
        if predictor.num_code_groups != CODE_GROUPS:
            raise ValueError(f"code_predictor: {CODE_GROUPS} code groups are required")
        if predictor.vocab_size != self.ids.codebook_size:
            raise ValueError("code_predictor.vocab_size must equal codebook_size")
        self.code_predictor: Any = Qwen3OmniMoeTalkerCodePredictorModelForConditionalGeneration(predictor)
        if predictor.hidden_size != decoder.hidden_size:
            # A predictor narrower than the talker (the 1.7B release): its codebook tables are in
            # the talker's width (the talker sums them too) and every predictor input passes
            # through a projection to its own width.
            self.code_predictor.model.codec_embedding = nn.ModuleList(
                nn.Embedding(predictor.vocab_size, decoder.hidden_size) for _ in range(CODE_GROUPS - 1))
            self.code_predictor.small_to_mtp_projection = nn.Linear(decoder.hidden_size, predictor.hidden_size)
        else:
            self.code_predictor.small_to_mtp_projection = nn.Identity()

    def text_part(self, text_ids: torch.Tensor) -> torch.Tensor:
        out: torch.Tensor = self.text_projection(self.text_embedding(text_ids))
        return out

    def frame_embedding(self, codes: torch.Tensor) -> torch.Tensor:
        """codes [..., 16] -> the sum of their 16 codebook embeddings [..., hidden]."""
        total: torch.Tensor = self.model.embed_tokens(codes[..., 0])
        for g in range(1, CODE_GROUPS):
            total = total + self.code_predictor.model.codec_embedding[g - 1](codes[..., g])
        return total


def _vocoder(config: dict[str, Any]) -> Any:
    """The speech tokenizer's decoder: a Qwen3-TTS release's 12 Hz codec decoder (model_type
    "qwen3_tts_tokenizer_12hz"), or transformers' Qwen3-Omni Code2Wav (a Code2Wav config, no
    model_type)."""
    kind = config.get("model_type")
    if kind not in (None, codec.MODEL_TYPE):
        raise ValueError(f"speech tokenizer model_type {kind!r} is not supported (only {codec.MODEL_TYPE!r}, or a "
                         "Qwen3-Omni Code2Wav config)")
    try:
        if kind == codec.MODEL_TYPE:
            model: Any = codec.Qwen3TtsCodecDecoder(config["decoder_config"])
        else:
            from transformers.models.qwen3_omni_moe.configuration_qwen3_omni_moe import Qwen3OmniMoeCode2WavConfig
            from transformers.models.qwen3_omni_moe.modeling_qwen3_omni_moe import Qwen3OmniMoeCode2Wav

            model = Qwen3OmniMoeCode2Wav(Qwen3OmniMoeCode2WavConfig(**config))
    except (KeyError, TypeError) as exc:
        raise ValueError(f"speech tokenizer config: {exc!r} is missing or malformed") from exc
    if int(model.config.num_quantizers) != CODE_GROUPS:
        raise ValueError(f"vocoder num_quantizers must be {CODE_GROUPS}")
    if int(model.total_upsample) != SAMPLES_PER_FRAME:
        raise ValueError(f"vocoder upsampling is {model.total_upsample}, not {SAMPLES_PER_FRAME} samples per frame")
    return model


def _vocoder_prefix(config: dict[str, Any]) -> tuple[str, tuple[str, ...]]:
    """(prefix of the decoder's weights, prefixes of weights the decoder does not use) in
    speech_tokenizer/model.safetensors: a release's also holds the encoder, which TTS never runs."""
    return ("decoder.", ("encoder.",)) if config.get("model_type") == codec.MODEL_TYPE else ("", ())


class Qwen3Tts(nn.Module):
    tokenizer: Any  # the text side (a `tokenizers.Tokenizer`), set by from_pretrained

    """The three stages of a local checkpoint's config (a release's is mapped onto it by
    `from_pretrained`); `prompt` is the talker's prefix (the local layout's by default)."""

    def __init__(self, config: dict[str, Any], vocoder_config: dict[str, Any], prompt: Prompt | None = None) -> None:
        super().__init__()
        if config.get("model_type") != MODEL_TYPE:
            raise ValueError(f"model_type {config.get('model_type')!r} is not {MODEL_TYPE!r}")
        if "decoder" not in config.get("talker_config", {"decoder": None}):
            raise ValueError("a Qwen3-TTS release's config (talker_config without a decoder section): load the "
                             "release directory with Qwen3Tts.from_pretrained, which maps it")
        if config.get("talker_config", {}).get("decoder", {}).get("rope_scaling"):
            raise ValueError("multimodal/scaled RoPE in the talker is not supported")
        self.config = config
        self.talker = Talker(config["talker_config"])
        self.vocoder: Any = _vocoder(vocoder_config)
        if int(self.vocoder.config.codebook_size) != self.talker.ids.codebook_size:
            raise ValueError(f"the vocoder's codebook_size ({self.vocoder.config.codebook_size}) is not the "
                             f"talker's ({self.talker.ids.codebook_size})")
        self.vocoder_config = vocoder_config
        self.text_pad_id = int(config["text_pad_token_id"])
        self.min_frames = int(config.get("min_frames", 0))  # frames before end of speech may be said
        ids = self.talker.ids
        self.prompt = prompt or Prompt((), ids.pad, ((self.text_pad_id, ids.bos),), self.text_pad_id)
        self.sampling = Sampling()  # the checkpoint's recommended sampling (greedy for a local one)
        self.eval()

    @property
    def ids(self) -> CodecIds:
        return self.talker.ids

    @classmethod
    def from_pretrained(cls, directory: Path, voice: Voice | None = None) -> Qwen3Tts:
        """A local checkpoint, or a Qwen3-TTS release (whose prompt `voice` chooses)."""
        from safetensors.torch import load_file

        from omni_edge.export.models.qwen3_tts import release

        for rel in ("config.json", "model.safetensors", f"{VOCODER_DIR}/config.json", f"{VOCODER_DIR}/model.safetensors"):
            if not (directory / rel).is_file():
                raise ValueError(f"{directory}: not a {MODEL_TYPE} checkpoint directory (no {rel})")
        config = json.loads((directory / "config.json").read_text())
        vocoder_config = json.loads((directory / VOCODER_DIR / "config.json").read_text())
        tokenizer = release.text_tokenizer(directory)
        weights = load_file(str(directory / "model.safetensors"))
        if release.is_release(config):
            mapped = release.convert(config, tokenizer, voice or Voice(), directory)
            model = cls(mapped.config, vocoder_config, mapped.prompt)
            model.sampling = mapped.sampling
            weights = release.rename_weights(weights)
        else:
            if voice not in (None, Voice()):
                raise ValueError("speakers, languages and instructions are a Qwen3-TTS release's; this checkpoint has none")
            model = cls(config, vocoder_config)
        model.tokenizer = tokenizer
        _load_exact(model.talker, weights, "talker.", release.UNUSED_PREFIXES)
        prefix, unused = _vocoder_prefix(vocoder_config)
        _load_exact(model.vocoder, load_file(str(directory / VOCODER_DIR / "model.safetensors")), prefix, unused)
        return model.eval()

    def save_pretrained(self, directory: Path) -> None:
        from safetensors.torch import save_file

        (directory / VOCODER_DIR).mkdir(parents=True, exist_ok=True)
        (directory / "config.json").write_text(json.dumps(self.config, indent=2) + "\n")
        (directory / VOCODER_DIR / "config.json").write_text(json.dumps(self.vocoder_config, indent=2) + "\n")
        save_file({f"talker.{k}": v.contiguous() for k, v in self.talker.state_dict().items()},
                  str(directory / "model.safetensors"), metadata={"format": "pt"})
        prefix, _ = _vocoder_prefix(self.vocoder_config)
        save_file({prefix + k: v.contiguous() for k, v in self.vocoder.state_dict().items()},
                  str(directory / VOCODER_DIR / "model.safetensors"), metadata={"format": "pt"})

    @functools.cached_property
    def tail_samples(self) -> int:
        """Samples of the last frame that only a following frame releases (the vocoder's delay);
        fixed by the architecture, measured once."""
        with torch.no_grad():
            one = self.vocoder(torch.zeros(1, CODE_GROUPS, 1, dtype=torch.long))
        return SAMPLES_PER_FRAME - int(one.shape[-1])


def _load_exact(module: nn.Module, state: dict[str, torch.Tensor], prefix: str, unused: tuple[str, ...] = ()) -> None:
    """Every parameter present and no unknown ones (but those under the `unused` prefixes): a
    checkpoint of another shape is refused."""
    mine = {k[len(prefix):]: v for k, v in state.items() if k.startswith(prefix)}
    missing, unexpected = module.load_state_dict(mine, strict=False)
    buffers = {name for name, _ in module.named_buffers()}
    missing = [m for m in missing if m not in buffers]
    foreign = [k for k in state if not k.startswith(prefix) and not k.startswith(unused)]
    if missing or unexpected or foreign:
        raise ValueError(f"checkpoint weights do not match the architecture: missing {missing[:5]}, "
                         f"unexpected {(unexpected + foreign)[:5]}")


# ---- reference decoding ---------------------------------------------------------------------

def penalized(logits: torch.Tensor, history: Iterable[int], penalty: float) -> torch.Tensor:
    """The repetition penalty (as transformers applies it): each id in `history` once, its score
    divided by `penalty` when positive, multiplied when negative."""
    seen = torch.tensor(sorted(set(history)), dtype=torch.long)
    if penalty == 1.0 or not len(seen):
        return logits
    score = logits[seen]
    out = logits.clone()
    out[seen] = torch.where(score < 0, score * penalty, score / penalty)
    return out


@dataclass
class Trace:
    """What a greedy reference run records per decision (frame by frame: codebook 0, then 1..15;
    choosing end of speech is one more decision), for `comparison.compare_greedy`: the top-2 gap
    of the logits it chose from and how far below their best its choice scored. With `forced`
    (a run's decisions, `comparison.flatten_codes`) it takes those instead of its own greedy
    picks and stops when they run out: the reference evaluated along another run's path."""

    forced: list[int] | None = None
    gaps: list[float] = field(default_factory=list)
    deficits: list[float] = field(default_factory=list)

    def exhausted(self) -> bool:
        return self.forced is not None and len(self.gaps) >= len(self.forced)

    def choose(self, logits: torch.Tensor, picked: int) -> int:
        choice = picked if self.forced is None else self.forced[len(self.gaps)]
        scores = logits.double().numpy()
        self.gaps.append(top2_gap(scores))
        self.deficits.append(float(scores.max() - scores[choice]))
        return choice


def _pick(logits: torch.Tensor, sampling: Sampling, gen: torch.Generator, history: Iterable[int] = (),
          trace: Trace | None = None) -> int:
    logits = penalized(logits, history, sampling.repetition_penalty)
    if sampling.temperature < GREEDY_BELOW:
        best = int(torch.argmax(logits))
        return best if trace is None else trace.choose(logits, best)
    if trace is not None:
        raise ValueError("a trace records greedy decisions only")
    scaled = logits / sampling.temperature
    if sampling.top_k > 0:
        kth = torch.topk(scaled, min(sampling.top_k, scaled.numel())).values[-1]
        scaled = torch.where(scaled < kth, torch.full_like(scaled, -float("inf")), scaled)
    probs = torch.softmax(scaled, -1)
    if sampling.top_p < 1.0:  # the smallest set of most likely ids whose mass reaches top_p
        ordered, order = torch.sort(probs, descending=True)
        keep = torch.cumsum(ordered, 0) - ordered < sampling.top_p
        probs = torch.zeros_like(probs).scatter(0, order[keep], ordered[keep])
    if sampling.min_p > 0.0:  # ids at least min_p times as likely as the most likely one
        probs = torch.where(probs >= sampling.min_p * probs.max(), probs, torch.zeros_like(probs))
    return int(torch.multinomial(probs, 1, generator=gen))


def suppressed(ids: CodecIds, frame_index: int, min_frames: int) -> torch.Tensor:
    """Codebook-0 ids never spoken at this frame: every special id but eos, and eos too before
    `min_frames` frames."""
    out = torch.zeros(ids.vocab, dtype=torch.bool)
    out[ids.codebook_size:] = True
    out[ids.eos] = frame_index < min_frames
    return out


def _talk(model: Qwen3Tts, embeds: torch.Tensor, text_part: Callable[[int], torch.Tensor], max_frames: int,
          sampling: Sampling, trace: Trace | None = None) -> Iterator[list[int]]:
    """The talker + code predictor frame by frame with KV caches, from the first input `embeds`;
    the input of frame t > 0 is text_part(t) plus the embeddings of frame t-1's codes."""
    from transformers import DynamicCache

    t, ids = model.talker, model.ids
    gen = torch.Generator().manual_seed(sampling.seed)
    cache = DynamicCache(config=t.model.config)
    spoken: list[int] = []
    for frame_index in range(max_frames):
        if trace is not None and trace.exhausted():
            return
        hidden = t.model(inputs_embeds=embeds, cache=cache, use_cache=True).last_hidden_state[:, -1:]
        logits0 = t.codec_head(hidden)[0, -1].masked_fill(suppressed(ids, frame_index, model.min_frames), -float("inf"))
        c0 = _pick(logits0, sampling, gen, spoken, trace)
        if c0 == ids.eos:
            return
        spoken.append(c0)
        frame = [c0, *predict_codes(model, hidden, c0, sampling, gen, trace)]
        yield frame
        embeds = text_part(frame_index + 1) + t.frame_embedding(torch.tensor([[frame]]))


def prefix_embeds(model: Qwen3Tts, text_ids: list[int]) -> torch.Tensor:
    """The talker's input over its prompt: each row's projected text embedding plus its codec
    embedding (none for ABSENT)."""
    t = model.talker
    rows = model.prompt.rows(text_ids)
    text = t.text_part(torch.tensor([[r[0] for r in rows]]))
    codec = torch.tensor([[max(r[1], 0) for r in rows]])
    present = torch.tensor([[r[1] != ABSENT for r in rows]]).unsqueeze(-1)
    out: torch.Tensor = text + t.model.embed_tokens(codec) * present
    return out


@torch.no_grad()
def stream_codes(model: Qwen3Tts, text_ids: list[int], max_frames: int,
                 sampling: Sampling = GREEDY, trace: Trace | None = None) -> Iterator[list[int]]:
    """Text to speech: yields each frame's 16 codes as it is made (at most max_frames; fewer when
    codebook 0 says end of speech), after the prompt's prefix (`Prompt`)."""
    t = model.talker
    texts = model.prompt.frame_inputs(text_ids, max_frames)

    def text_part(i: int) -> torch.Tensor:  # the input after frame i - 1
        return t.text_part(torch.tensor([[texts[i - 1]]]))

    yield from _talk(model, prefix_embeds(model, text_ids), text_part, max_frames, sampling, trace)


@torch.no_grad()
def stream_codes_from_hidden(model: Qwen3Tts, hidden: torch.Tensor, max_frames: int,
                             sampling: Sampling = GREEDY, trace: Trace | None = None) -> Iterator[list[int]]:
    """Dual-track speech from a thinker's hidden states [n, text_hidden] (the omni pipeline):
    frame t reads text_projection(hidden[t]) (the text pad's part once t >= n) plus the codes of
    frame t-1 (the codec BOS for frame 0), so it needs only the first t + 1 text tokens."""
    t, ids = model.talker, model.ids
    pad = t.text_part(torch.tensor([[model.prompt.frame_text]]))

    def text_part(i: int) -> torch.Tensor:
        return t.text_projection(hidden[i].reshape(1, 1, -1)) if i < hidden.shape[0] else pad

    first = text_part(0) + t.model.embed_tokens(torch.tensor([[ids.bos]]))
    yield from _talk(model, first, text_part, max_frames, sampling, trace)


def generate_codes(model: Qwen3Tts, text_ids: list[int], max_frames: int, sampling: Sampling = GREEDY,
                   trace: Trace | None = None) -> torch.Tensor:
    """Every frame of `stream_codes`: codes [T, 16]."""
    frames = list(stream_codes(model, text_ids, max_frames, sampling, trace))
    return torch.tensor(frames, dtype=torch.long).reshape(-1, CODE_GROUPS)


def compare_codes(run: Callable[[Trace], Any], got: Any, max_frames: int, eos: int, tie_gap: float,
                  expected: Any = None) -> tuple[Agreement, np.ndarray]:
    """A run's codes `got` [T, 16] against the reference by `comparison.compare_greedy`, and the
    reference's codes. `run(trace)` runs the reference (greedy) for at most `max_frames` frames;
    `expected`: the reference's codes as written before (a fixture, or computed once for several
    runs), whose gaps it gives along their path; else its own run. A run of fewer than
    `max_frames` frames ended by choosing end of speech."""
    def decisions(codes: Any) -> tuple[np.ndarray, list[int]]:
        frames = np.asarray(codes, np.int64).reshape(-1, CODE_GROUPS)
        return frames, flatten_codes(frames, len(frames) < max_frames, eos)

    if expected is None:
        own = Trace()
        reference, ref_decisions = decisions(run(own))
        gaps = own.gaps
    else:
        reference, ref_decisions = decisions(expected)
        along = Trace(forced=ref_decisions)
        run(along)
        gaps = along.gaps
    ran = decisions(got)[1]
    forced = Trace(forced=ran)
    run(forced)
    return compare_greedy(ran, ref_decisions, gaps, tie_gap, forced.deficits), reference


def predict_codes(model: Qwen3Tts, hidden: torch.Tensor, c0: int, sampling: Sampling, gen: torch.Generator,
                  trace: Trace | None = None) -> list[int]:
    """Codebooks 1..15 of one frame from the talker's hidden state and codebook 0."""
    from transformers import DynamicCache

    p = model.talker.code_predictor
    cache = DynamicCache(config=p.config)
    embeds = p.small_to_mtp_projection(torch.cat([hidden, model.talker.model.embed_tokens(torch.tensor([[c0]]))], dim=1))
    codes: list[int] = []
    for g in range(1, CODE_GROUPS):
        out = p.model(inputs_embeds=embeds, cache=cache, use_cache=True).last_hidden_state[:, -1]
        code = _pick(p.lm_head[g - 1](out)[0], sampling, gen, trace=trace)
        codes.append(code)
        embeds = p.small_to_mtp_projection(p.model.codec_embedding[g - 1](torch.tensor([[code]])))
    return codes


@torch.no_grad()
def decode_offline(model: Qwen3Tts, codes: torch.Tensor) -> torch.Tensor:
    """All frames at once, then the tail released by one pad frame (code 0 in every codebook):
    exactly T x 1920 float samples in [-1, 1]."""
    n = codes.shape[0]
    padded = torch.cat([codes, torch.zeros(1, CODE_GROUPS, dtype=torch.long)]).t()[None]
    wav: torch.Tensor = model.vocoder(padded)[0, 0, : n * SAMPLES_PER_FRAME]
    return wav


@torch.no_grad()
def decode_window(model: Qwen3Tts, codes: torch.Tensor, start: int, end: int, shape: StreamShape,
                  final: bool) -> torch.Tensor:
    """The samples that frames [start, end) make final, decoded in one fixed-size window.

    Samples [a, b) of the stream with a = start*1920 - tail (0 for the first chunk) and b =
    end*1920 - tail, or end*1920 on the final chunk (a pad frame after it releases the tail)."""
    ctx, a, b = shape.emitted(start, end, model.tail_samples, final, SAMPLES_PER_FRAME)
    frames = codes[start - ctx:end]
    pad = shape.window - frames.shape[0]
    window = torch.cat([frames, torch.zeros(pad, CODE_GROUPS, dtype=torch.long)]).t()[None]
    wav: torch.Tensor = model.vocoder(window)[0, 0]
    return wav[a:b]


DEFAULT_STREAM = StreamShape()


def decode_streaming(model: Qwen3Tts, codes: torch.Tensor, shape: StreamShape = DEFAULT_STREAM,
                     ends: Sequence[int] | None = None) -> list[torch.Tensor]:
    """The straightforward PyTorch streaming loop: one vocoder window per chunk; the chunks
    `shape` would cut, or the ones a stream reported (`ends`, see StreamShape.chunks_ending)."""
    chunks = shape.chunks(codes.shape[0]) if ends is None else StreamShape.chunks_ending(ends)
    return [decode_window(model, codes, s, e, shape, final) for s, e, final in chunks]
