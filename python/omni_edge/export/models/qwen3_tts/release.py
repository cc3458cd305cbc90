"""A Qwen3-TTS release (Qwen3-TTS-12Hz-0.6B / 1.7B) mapped onto the local speech modules: its
config, its weights' names, its text tokenizer, its prompt and its sampling defaults, as qwen-tts
0.1.1 runs them (`Qwen3TTSForConditionalGeneration.generate`, non-streaming text input: the whole
text is in the prompt, which is how its CustomVoice and VoiceDesign entry points call it).

The talker is a Qwen3 decoder under other names (`talker.model.codec_embedding` is codebook 0's
table, `talker.model.text_embedding` the text table) with interleaved multimodal RoPE, whose three
position rows are equal for speech (so it is 1-D RoPE); its code predictor is the local one, read
through `small_to_mtp_projection` when it is narrower than the talker (1.7B).

The text is tokenized on its own, where generate() tokenizes it inside its chat template and
slices it out ([3:-5]). The two agree unless the text begins with a line break (possibly after
spaces): Qwen2's pre-tokenizer then joins it with the template's "\n" into one token, so
generate()'s role row and first text token differ from these.
"""

from __future__ import annotations

import json
import warnings
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from omni_edge.export.models.qwen3_tts.reference import ABSENT, CODE_GROUPS, MODEL_TYPE, Prompt, Sampling
from omni_edge.export.speech import Voice

UNUSED_PREFIXES = ("speaker_encoder.",)  # the Base model's x-vector encoder: voice cloning only
MIN_FRAMES = 2  # generate()'s min_new_tokens: end of speech is not said before two frames
ROLE = "<|im_start|>assistant\n"  # the three text-only rows before the codec rows
INSTRUCT = "<|im_start|>user\n{}<|im_end|>\n"

# qwen-tts's config defaults, for the keys a release's config.json leaves out (it is written
# with only the values that differ from them).
TALKER_DEFAULTS: dict[str, Any] = dict(
    vocab_size=3072, hidden_size=1024, intermediate_size=2048, num_hidden_layers=20, num_attention_heads=16,
    num_key_value_heads=2, hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6, rope_theta=10000,
    rope_scaling=None, attention_bias=False, use_sliding_window=False, num_code_groups=32, text_hidden_size=2048,
    codec_eos_token_id=4198, codec_think_id=4202, codec_nothink_id=4203, codec_think_bos_id=4204,
    codec_think_eos_id=4205, codec_pad_id=4196, codec_bos_id=4197)
PREDICTOR_DEFAULTS: dict[str, Any] = dict(
    vocab_size=2048, hidden_size=1024, intermediate_size=3072, num_hidden_layers=5, num_attention_heads=16,
    num_key_value_heads=8, head_dim=128, hidden_act="silu", max_position_embeddings=32768, rms_norm_eps=1e-6,
    rope_theta=10000, rope_scaling=None, attention_bias=False, use_sliding_window=False, num_code_groups=32)
TEXT_DEFAULTS: dict[str, Any] = dict(tts_pad_token_id=151671, tts_bos_token_id=151672, tts_eos_token_id=151673)
GENERATE_DEFAULTS: dict[str, Any] = dict(do_sample=True, temperature=0.9, top_k=50, top_p=1.0, repetition_penalty=1.05,
                                         subtalker_dosample=True, subtalker_temperature=0.9, subtalker_top_k=50,
                                         subtalker_top_p=1.0)
SUPPRESSED_IDS = 1024  # generate() never says the last 1024 ids of codebook 0 but eos: the ids past the codebook


def is_release(config: dict[str, Any]) -> bool:
    """A release's config.json: model_type qwen3_tts with a talker_config of its own shape (the
    local layout nests the decoder under talker_config.decoder)."""
    return config.get("model_type") == MODEL_TYPE and "decoder" not in config.get("talker_config", {"decoder": None})


def text_tokenizer(directory: Path) -> Any:
    """The checkpoint's text tokenizer (a `tokenizers.Tokenizer`): tokenizer.json, or a release's
    Qwen2 vocab.json + merges.txt + tokenizer_config.json converted by transformers."""
    from tokenizers import Tokenizer

    if (directory / "tokenizer.json").is_file():
        return Tokenizer.from_file(str(directory / "tokenizer.json"))
    if not all((directory / n).is_file() for n in ("vocab.json", "merges.txt", "tokenizer_config.json")):
        raise ValueError(f"{directory}: no text tokenizer (tokenizer.json, or vocab.json + merges.txt + "
                         "tokenizer_config.json)")
    from transformers import AutoTokenizer

    return AutoTokenizer.from_pretrained(str(directory)).backend_tokenizer


@dataclass(frozen=True)
class Mapped:
    config: dict[str, Any]  # in the local layout (`Qwen3Tts`)
    prompt: Prompt
    sampling: Sampling


def _section(config: dict[str, Any], defaults: dict[str, Any], where: str) -> dict[str, Any]:
    merged = {**defaults, **{k: v for k, v in config.items() if k in defaults or k in ("head_dim", "text_vocab_size")}}
    if merged["hidden_act"] != "silu" or merged["attention_bias"] or merged["use_sliding_window"]:
        raise ValueError(f"{where}: only silu, no attention bias and no sliding window are supported")
    return merged


def _decoder(c: dict[str, Any]) -> dict[str, Any]:
    return {"vocab_size": int(c["vocab_size"]), "hidden_size": int(c["hidden_size"]),
            "intermediate_size": int(c["intermediate_size"]), "num_hidden_layers": int(c["num_hidden_layers"]),
            "num_attention_heads": int(c["num_attention_heads"]), "num_key_value_heads": int(c["num_key_value_heads"]),
            "head_dim": int(c.get("head_dim") or c["hidden_size"] // c["num_attention_heads"]),
            "max_position_embeddings": int(c["max_position_embeddings"]), "rope_theta": float(c["rope_theta"]),
            "rms_norm_eps": float(c["rms_norm_eps"]), "tie_word_embeddings": False}


def _check_rope(scaling: dict[str, Any] | None, head_dim: int, where: str) -> None:
    """Multimodal RoPE with equal position rows (speech has no image grid) is 1-D RoPE; anything
    that scales frequencies is not."""
    if scaling is None:
        return
    kind = scaling.get("rope_type", scaling.get("type", "default"))
    sections = scaling.get("mrope_section")
    if kind != "default" or (sections is not None and sum(sections) != head_dim // 2):
        raise ValueError(f"{where}.rope_scaling {scaling!r}: only default multimodal RoPE is supported")


def convert(config: dict[str, Any], tokenizer: Any, voice: Voice, directory: Path) -> Mapped:
    """The release's config in the local layout, its prompt for `voice`, and its sampling."""
    try:
        talker = _section(config["talker_config"], TALKER_DEFAULTS, "talker_config")
        predictor = _section(config["talker_config"].get("code_predictor_config") or {}, PREDICTOR_DEFAULTS,
                             "talker_config.code_predictor_config")
        text = {**TEXT_DEFAULTS, **{k: config[k] for k in TEXT_DEFAULTS if k in config}}
        decoder, code_predictor = _decoder(talker), {**_decoder(predictor), "num_code_groups": CODE_GROUPS}
        if int(talker["num_code_groups"]) != CODE_GROUPS or int(predictor["num_code_groups"]) != CODE_GROUPS:
            raise ValueError(f"talker_config: {CODE_GROUPS} code groups are required (a 12 Hz release)")
        _check_rope(talker["rope_scaling"], decoder["head_dim"], "talker_config")
        _check_rope(predictor["rope_scaling"], code_predictor["head_dim"], "code_predictor_config")
        if int(talker["vocab_size"]) - SUPPRESSED_IDS != int(predictor["vocab_size"]):
            raise ValueError(f"talker vocab_size {talker['vocab_size']} is not the codebook ({predictor['vocab_size']}) + "
                             f"{SUPPRESSED_IDS} special ids, the range generate() suppresses")
        local = {
            "model_type": MODEL_TYPE, "text_pad_token_id": int(text["tts_pad_token_id"]), "min_frames": MIN_FRAMES,
            "talker_config": {
                "codebook_size": int(predictor["vocab_size"]),
                "codec_ids": {"pad": int(talker["codec_pad_id"]), "bos": int(talker["codec_bos_id"]),
                              "eos": int(talker["codec_eos_token_id"])},
                "text_vocab_size": int(config["talker_config"]["text_vocab_size"]),
                "text_hidden_size": int(talker["text_hidden_size"]), "decoder": decoder, "code_predictor": code_predictor},
            "release": {k: config.get(k) for k in ("tts_model_size", "tts_model_type", "tokenizer_type")},
        }
        prompt = release_prompt(config["talker_config"], talker, text, tokenizer, voice,
                                str(config.get("tts_model_size", "")))
    except KeyError as exc:
        raise ValueError(f"Qwen3-TTS release config: {exc} is missing") from exc
    return Mapped(local, prompt, release_sampling(directory))


def release_prompt(raw: dict[str, Any], talker: dict[str, Any], text: dict[str, Any], tokenizer: Any, voice: Voice,
                   model_size: str) -> Prompt:
    """generate()'s prompt: [instruction rows], the role rows (text only), the text pad beside
    think / [language] / think end / [speaker], the text bos beside the codec pad; then (Prompt)
    each text token beside the codec pad, the text eos beside the codec pad and the text pad
    beside the codec bos; or, streaming the text, the first text token beside the codec bos and
    the others (then the text eos) one per frame."""
    pad_t, bos_t, eos_t = int(text["tts_pad_token_id"]), int(text["tts_bos_token_id"]), int(text["tts_eos_token_id"])
    languages: dict[str, int] = raw.get("codec_language_id") or {}
    speakers: dict[str, int] = raw.get("spk_id") or {}
    dialects: dict[str, Any] = raw.get("spk_is_dialect") or {}
    language, speaker = voice.language.lower(), voice.speaker.lower()
    if language != "auto" and language not in languages:
        raise ValueError(f"language {voice.language!r} is not one of this release's: auto, "
                         f"{', '.join(k for k in languages if 'dialect' not in k)}")
    if speaker and speaker not in speakers:
        raise ValueError(f"speaker {voice.speaker!r} is not one of this release's: {', '.join(speakers) or 'none'}")
    if voice.instruct and model_size == "0b6":
        raise ValueError("the 0.6B release takes no instruction")
    language_id = None if language == "auto" else int(languages[language])
    if speaker and language in ("chinese", "auto") and dialects.get(speaker):
        if dialects[speaker] not in languages:
            raise ValueError(f"speaker {voice.speaker!r} speaks {dialects[speaker]!r}, which is not in codec_language_id")
        language_id = int(languages[dialects[speaker]])  # a dialect speaker speaks their dialect
    tags = ([int(talker["codec_nothink_id"]), int(talker["codec_think_bos_id"]), int(talker["codec_think_eos_id"])]
            if language_id is None else
            [int(talker["codec_think_id"]), int(talker["codec_think_bos_id"]), language_id,
             int(talker["codec_think_eos_id"])])
    if speaker:
        tags.append(int(speakers[speaker]))
    role = tokenizer.encode(ROLE).ids
    if len(role) != 3:
        raise ValueError(f"the tokenizer splits {ROLE!r} into {len(role)} tokens; a release's makes 3")
    instruct = tokenizer.encode(INSTRUCT.format(voice.instruct)).ids if voice.instruct else []
    codec_pad, codec_bos = int(talker["codec_pad_id"]), int(talker["codec_bos_id"])
    head = tuple([(int(t), ABSENT) for t in [*instruct, *role]] + [(pad_t, c) for c in tags] + [(bos_t, codec_pad)])
    if voice.stream_text:  # the first text token beside the codec bos; the rest, then the text eos, one per frame
        return Prompt(head, codec_bos, (), pad_t, stream_text=True, text_end=eos_t)
    return Prompt(head, codec_pad, ((eos_t, codec_pad), (pad_t, codec_bos)), pad_t)


def release_sampling(directory: Path) -> Sampling:
    """generation_config.json's sampling (generate()'s defaults where it is silent). One sampler
    serves codebook 0 and the code predictor here; the releases set both alike (a warning says
    when one does not)."""
    path = directory / "generation_config.json"
    g = {**GENERATE_DEFAULTS, **(json.loads(path.read_text()) if path.is_file() else {})}
    pairs = [("do_sample", "subtalker_dosample"), *((k, f"subtalker_{k}") for k in ("temperature", "top_k", "top_p"))]
    if any(g[talker] != g[sub] for talker, sub in pairs):
        warnings.warn("the release samples its code predictor unlike codebook 0; both use codebook 0's sampling here",
                      stacklevel=2)
    return Sampling(temperature=float(g["temperature"]) if g["do_sample"] else 0.0, top_k=int(g["top_k"]),
                    top_p=float(g["top_p"]), repetition_penalty=float(g["repetition_penalty"]))


def rename_weights(weights: dict[str, torch.Tensor]) -> dict[str, torch.Tensor]:
    """The release's parameter names as the local modules name them, in float32 (releases store
    bfloat16)."""
    renamed = {"talker.model.codec_embedding.weight": "talker.model.embed_tokens.weight",
               "talker.model.text_embedding.weight": "talker.text_embedding.weight"}
    return {renamed.get(k, k): v.float() for k, v in weights.items()}
