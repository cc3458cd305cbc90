"""Writes the Qwen3-TTS release talker fixture of tests/export/models/qwen3_tts/test_qwen3_tts_release.py: a small
Qwen3-TTS checkpoint laid out as a release is (config.json with talker_config, model.safetensors
in bfloat16 under talker.*, a Qwen2 tokenizer as vocab.json + merges.txt + tokenizer_config.json,
generation_config.json, speech_tokenizer/), built by the real implementation (the `qwen-tts`
package) with random weights, and the codes its own generate() makes (reference.safetensors +
reference.json).

Release-shaped where it matters: codebook 0 has 3072 ids with the release's special ids (pad 2148,
bos 2149, eos 2150, think 2154..think_eos 2157, language and speaker ids inside [2048, 3072)),
interleaved multimodal RoPE, and a code predictor narrower than the talker (the 1.7B's
small_to_mtp_projection). Widths are tiny and the text vocabulary is a locally trained one.

Not run by the tests (qwen-tts needs transformers 4.57, the project runs 5.x). To regenerate,
build the side venv of tests/data/qwen3_tts_12hz/make_fixture.py, then
    /tmp/qvenv/bin/python tests/data/qwen3_tts_release/make_fixture.py tests/data/qwen3_tts_release
"""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qwen_tts_side import randomize_decoder, stub_torchaudio

stub_torchaudio()

from qwen_tts.core.models.configuration_qwen3_tts import Qwen3TTSConfig  # noqa: E402
from qwen_tts.core.models.modeling_qwen3_tts import Qwen3TTSForConditionalGeneration  # noqa: E402
from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2DecoderConfig,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder  # noqa: E402

CORPUS = """The quick brown fox jumps over the lazy dog. Speech synthesis turns written text into audio.
A talker predicts the first codebook of every frame; a code predictor fills the other fifteen.
The vocoder upsamples twelve and a half frames per second to twenty four thousand samples.
Hello from the release talker. Every streamed chunk must equal the offline decode of its codes.
Numbers like 12, 24000 and 1920 appear in the text, and so do commas, periods and questions?
""" * 4 + "assistant\nuser\nsystem\n" * 60  # the chat roles are one token each, as in Qwen's vocabulary
SPECIALS = ["<|endoftext|>", "<|im_start|>", "<|im_end|>", "<tts_pad>", "<tts_text_bos>", "<tts_text_eod>"]
QWEN2_SPLIT = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*|"
               r"\s*[\r\n]+|\s+(?!\S)|\s+")
CODEC = dict(codec_pad_id=2148, codec_bos_id=2149, codec_eos_token_id=2150, codec_think_id=2154,
             codec_nothink_id=2155, codec_think_bos_id=2156, codec_think_eos_id=2157)
LANGUAGES = {"english": 2050, "chinese": 2055, "beijing_dialect": 2074}
SPEAKERS = {"vivian": 3000, "ryan": 3011}
CASES = [  # both prompt shapes of generate(), with the text in the prompt; then read one token per frame
    dict(text="Hello from the release talker.", language="English", speaker="Vivian", instruct="", stream_text=False),
    dict(text="Speech synthesis turns text into audio.", language="Auto", speaker="", instruct="Speak slowly.",
         stream_text=False),
    dict(text="Hello from the release talker.", language="English", speaker="Vivian", instruct="", stream_text=True),
]
FRAMES = 24


def tokenizer(out: Path):
    from tokenizers import Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers, trainers

    tok = Tokenizer(models.BPE())
    tok.normalizer = normalizers.NFC()
    tok.pre_tokenizer = pre_tokenizers.Sequence([
        pre_tokenizers.Split(Regex(QWEN2_SPLIT), behavior="isolated", invert=False),
        pre_tokenizers.ByteLevel(add_prefix_space=False, use_regex=False)])
    tok.decoder = decoders.ByteLevel()
    tok.train_from_iterator([CORPUS], trainers.BpeTrainer(vocab_size=400, initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
                                                           show_progress=False))
    tok.model.save(str(out))  # vocab.json + merges.txt, as a Qwen2 release ships them
    base = tok.get_vocab_size()
    tok.add_special_tokens(SPECIALS)
    added = {str(base + i): {"content": s, "lstrip": False, "normalized": False, "rstrip": False, "single_word": False,
                             "special": True} for i, s in enumerate(SPECIALS)}
    (out / "tokenizer_config.json").write_text(json.dumps({
        "add_prefix_space": False, "added_tokens_decoder": added, "bos_token": None, "clean_up_tokenization_spaces": False,
        "eos_token": "<|im_end|>", "errors": "replace", "model_max_length": 131072, "pad_token": "<|endoftext|>",
        "split_special_tokens": False, "tokenizer_class": "Qwen2Tokenizer", "unk_token": None}, indent=2) + "\n")
    return tok, base


def randomize(model: torch.nn.Module, eos: int) -> None:
    """Weights at a trained model's scales, rounded to bfloat16 (as a release stores them); the
    heads sharpened so that greedy picks are not near-ties."""
    with torch.no_grad():
        for name, p in model.named_parameters():
            if p.dim() > 1:
                p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
            else:
                p.copy_(torch.randn_like(p) * 0.02 + (1.0 if "norm" in name else 0.0))
            if "codec_head" in name or "lm_head" in name:
                p.mul_(3.0)
            p.copy_(p.bfloat16().float())


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    tok, base = tokenizer(out)
    ids = {s: base + i for i, s in enumerate(SPECIALS)}
    talker = dict(vocab_size=3072, hidden_size=64, intermediate_size=128, num_hidden_layers=2, num_attention_heads=4,
                  num_key_value_heads=2, head_dim=16, hidden_act="silu", max_position_embeddings=4096,
                  rms_norm_eps=1e-6, rope_theta=1_000_000,
                  rope_scaling={"interleaved": True, "mrope_section": [4, 2, 2], "rope_type": "default"},
                  num_code_groups=16, text_hidden_size=48, text_vocab_size=base + len(SPECIALS) + 4,
                  spk_id=SPEAKERS, spk_is_dialect={k: False for k in SPEAKERS}, codec_language_id=LANGUAGES,
                  code_predictor_config=dict(vocab_size=2048, hidden_size=32, intermediate_size=64,
                                             num_hidden_layers=2, num_attention_heads=4, num_key_value_heads=2,
                                             head_dim=8, max_position_embeddings=65536, rms_norm_eps=1e-6,
                                             rope_theta=1_000_000, num_code_groups=16),
                  **CODEC)
    config = Qwen3TTSConfig(talker_config=talker, tokenizer_type="qwen3_tts_tokenizer_12hz", tts_model_size="1b7",
                            tts_model_type="custom_voice", im_start_token_id=ids["<|im_start|>"],
                            im_end_token_id=ids["<|im_end|>"], tts_pad_token_id=ids["<tts_pad>"],
                            tts_bos_token_id=ids["<tts_text_bos>"], tts_eos_token_id=ids["<tts_text_eod>"])
    config._attn_implementation = "eager"
    config.talker_config._attn_implementation = "eager"
    config.talker_config.code_predictor_config._attn_implementation = "eager"
    model = Qwen3TTSForConditionalGeneration(config).eval()
    randomize(model, CODEC["codec_eos_token_id"])
    config.architectures = ["Qwen3TTSForConditionalGeneration"]
    config.save_pretrained(out)  # as the release's was written: values equal to the defaults left out
    save_file({k: v.bfloat16().contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"),
              metadata={"format": "pt"})
    (out / "generation_config.json").write_text(json.dumps(dict(
        do_sample=True, repetition_penalty=1.05, temperature=0.9, top_p=1.0, top_k=50, subtalker_dosample=True,
        subtalker_temperature=0.9, subtalker_top_p=1.0, subtalker_top_k=50, max_new_tokens=8192), indent=2) + "\n")

    # Speech tokenizer: the 12 Hz decoder with the release's 2048 codes per codebook.
    st = out / "speech_tokenizer"
    st.mkdir(exist_ok=True)
    dconf = dict(codebook_size=2048, codebook_dim=16, latent_dim=32, hidden_size=32, intermediate_size=64,
                 head_dim=16, num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=1, num_quantizers=16,
                 sliding_window=8, rope_theta=10000, rms_norm_eps=1e-5, layer_scale_initial_scale=0.01,
                 max_position_embeddings=8000, upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=16)
    dc = Qwen3TTSTokenizerV2DecoderConfig(**dconf)
    dc._attn_implementation = "eager"
    decoder = Qwen3TTSTokenizerV2Decoder(dc).eval()
    randomize_decoder(decoder, lambda: torch.randint(0, 2048, (1, 16, 20)))
    save_file({f"decoder.{k}": v.bfloat16().contiguous() for k, v in decoder.state_dict().items()},
              str(st / "model.safetensors"))
    (st / "config.json").write_text(json.dumps({
        "model_type": "qwen3_tts_tokenizer_12hz", "decoder_config": dconf, "encoder_valid_num_quantizers": 16,
        "input_sample_rate": 24000, "output_sample_rate": 24000, "decode_upsample_rate": 1920,
        "encode_downsample_rate": 1920}, indent=2) + "\n")

    tensors: dict[str, torch.Tensor] = {}
    for i, case in enumerate(CASES):
        input_ids = torch.tensor([tok.encode(f"<|im_start|>assistant\n{case['text']}<|im_end|>\n<|im_start|>assistant\n").ids])
        instruct = (torch.tensor([tok.encode(f"<|im_start|>user\n{case['instruct']}<|im_end|>\n").ids])
                    if case["instruct"] else None)
        with torch.no_grad():
            codes, _ = model.generate(input_ids=[input_ids], instruct_ids=[instruct], languages=[case["language"]],
                                      speakers=[case["speaker"] or None], non_streaming_mode=not case["stream_text"],
                                      max_new_tokens=FRAMES, do_sample=False, subtalker_dosample=False,
                                      repetition_penalty=1.05)
        tensors[f"input_ids_{i}"] = input_ids
        tensors[f"codes_{i}"] = codes[0].contiguous()
        print(case, "->", tuple(codes[0].shape), codes[0][:, 0].tolist())
    # A talker that wants to end at once: a large constant in every input (the text projection's
    # bias) points every final hidden state one way, and codec_head's eos row points that way too.
    # generate() still speaks min_new_tokens=2 frames; the tests apply the same two tensors.
    with torch.no_grad():
        u = torch.randn(64, generator=torch.Generator().manual_seed(0))
        u /= u.pow(2).mean().sqrt()
        t = model.talker
        tensors["eager_fc2_bias"] = (t.text_projection.linear_fc2.bias + 100 * u).contiguous()
        tensors["eager_eos_row"] = (20 * t.model.norm.weight * u).contiguous()
        t.text_projection.linear_fc2.bias.copy_(tensors["eager_fc2_bias"])
        t.codec_head.weight[CODEC["codec_eos_token_id"]] = tensors["eager_eos_row"]
        case = CASES[0]
        codes, _ = model.generate(input_ids=[tensors["input_ids_0"]], instruct_ids=[None], languages=[case["language"]],
                                  speakers=[case["speaker"]], non_streaming_mode=True, max_new_tokens=FRAMES,
                                  do_sample=False, subtalker_dosample=False, repetition_penalty=1.05)
        tensors["codes_eager"] = codes[0].contiguous()
        print("eager eos ->", tuple(codes[0].shape))
    save_file(tensors, str(out / "reference.safetensors"))
    (out / "reference.json").write_text(json.dumps({"cases": CASES, "frames": FRAMES, "repetition_penalty": 1.05,
                                                    "sampling": "greedy (do_sample and subtalker_dosample off)"},
                                                   indent=2) + "\n")


if __name__ == "__main__":
    main(Path(sys.argv[1]))
