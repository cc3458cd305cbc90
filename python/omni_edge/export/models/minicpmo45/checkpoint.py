"""MiniCPM-o 4.5 checkpoints made here, in the release's layout (openbmb/MiniCPM-o-4_5): one
config.json (model_type "minicpmo", version "4.5", the Qwen3 LLM's fields at the top level,
vision_config, audio_config, slice_config, tts_config), the weights under the release's names
(`vpm.`, `resampler.`, `apm.`, `audio_projection_layer.`, `llm.`, `tts.`), a locally trained tokenizer carrying
the release's special tokens by name, and preprocessor_config.json. The LLM is briefly trained
on text (peaked next-token distributions); the encoders keep random weights."""

from __future__ import annotations

import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import torch

from omni_edge.export.checkpoint import preset_of, seed_everything, train_causal_lm, train_tokenizer, write_record
from omni_edge.export.corpus import stdlib_corpus
from omni_edge.export.models.minicpmo45.config import MODEL_TYPE, VERSION
from omni_edge.export.models.minicpmo45.flow import FlowConfig
from omni_edge.export.models.minicpmo45.hift import HiftConfig
from omni_edge.export.models.minicpmo45.token2wav_files import write_token2wav

# The release tokenizer's special tokens this pipeline reads (its added_tokens.json names them).
SPECIAL_TOKENS = ("<|endoftext|>", "<|im_start|>", "<|im_end|>", "<think>", "</think>", "<unk>", "<image>",
                  "</image>", "<slice>", "</slice>", "<image_id>", "</image_id>", "<|audio_start|>", "<|audio|>",
                  "<|audio_end|>", "<|spk_bos|>", "<|spk|>", "<|spk_eos|>", "<|tts_bos|>", "<|tts_eos|>",
                  "<|tts_pad|>", "<unit>", "</unit>",
                  # The talker's audio_bos / text_eos ids are these tokens' in the release (151687, 151692).
                  "<focus>", "</perception>")
# ChatML as the release's template renders a turn (media parts are expanded by the processor):
# thinking off and the spoken reply's start are switches of the generation prompt.
CHAT_TEMPLATE = (
    "{% for message in messages %}{{ '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>\\n' }}"
    "{% endfor %}{% if add_generation_prompt %}{{ '<|im_start|>assistant\\n' }}"
    "{% if enable_thinking is defined and enable_thinking is false %}{{ '<think>\\n\\n</think>\\n\\n' }}{% endif %}"
    "{% if use_tts_template is defined and use_tts_template is true %}{{ '<|tts_bos|>' }}{% endif %}{% endif %}"
)


@dataclass(frozen=True)
class Preset:
    vocab: int
    hidden: int  # a multiple of 128: the resampler's heads are 128 wide
    layers: int
    heads: int
    kv_heads: int
    intermediate: int
    vision_hidden: int
    vision_layers: int  # kept (the config says one more, dropped as the release's drop_vision_last_layer)
    vision_heads: int
    audio_width: int
    audio_layers: int
    audio_heads: int
    query_num: int
    train_steps: int
    talker_hidden: int
    talker_layers: int
    talker_heads: int


PRESETS: dict[str, Preset] = {
    # MiniCPM-o 4.5: a Qwen3-8B LLM (hidden 4096, 36 layers, 32/8 heads of 128), SigLIP-400M
    # (1152 wide, 27 layers, 26 kept), Whisper-medium's encoder (1024 wide, 24 layers), 64 queries.
    # Its talker: a Llama of 768 (20 layers, 12 heads), 6562 codes (the last ends the speech).
    "tiny": Preset(1024, 128, 2, 4, 2, 384, 32, 2, 2, 32, 2, 2, 16, 300, 32, 2, 2),
    "small": Preset(2048, 256, 4, 8, 4, 768, 64, 3, 4, 64, 3, 4, 32, 400, 64, 3, 4),
}
# token2wav at the preset's sizes (the release: 512-wide conformer 6+4 layers, a 512-wide 16-block
# DiT, HiFT of 512 channels): the flow and the vocoder; the voice models are not made here.
TOKEN2WAV: dict[str, tuple[FlowConfig, HiftConfig]] = {
    "tiny": (FlowConfig(width=64, heads=4, ffn=128, blocks=1, up_blocks=1, dit_width=64, dit_depth=2, dit_heads=4,
                        dit_head_dim=16), HiftConfig(base_channels=32, f0_channels=32)),
    "small": (FlowConfig(width=128, heads=4, ffn=256, blocks=2, up_blocks=2, dit_width=128, dit_depth=4, dit_heads=4,
                         dit_head_dim=32), HiftConfig(base_channels=64, f0_channels=64)),
}
PREPROCESSOR = {"image_processor_type": "MiniCPMVImageProcessor", "feature_extractor_type": "MiniCPMAAudioProcessor",
                "max_slice_nums": 9, "scale_resolution": 448, "patch_size": 14, "use_image_id": True,
                "norm_mean": [0.5, 0.5, 0.5], "norm_std": [0.5, 0.5, 0.5], "audio_pool_step": 5, "version": VERSION,
                "feature_size": 80, "sampling_rate": 16000, "hop_length": 160, "chunk_length": 30, "n_fft": 400}


def release_config(p: Preset, tokenizer: Any) -> dict[str, Any]:
    """config.json in the release's shape, at the preset's sizes."""
    head_dim = p.hidden // p.heads
    return {
        "architectures": ["MiniCPMO"], "model_type": MODEL_TYPE, "version": VERSION,
        "hidden_size": p.hidden, "intermediate_size": p.intermediate, "num_hidden_layers": p.layers,
        "num_attention_heads": p.heads, "num_key_value_heads": p.kv_heads, "head_dim": head_dim,
        "vocab_size": p.vocab, "max_position_embeddings": 8192, "rope_theta": 1_000_000.0, "rms_norm_eps": 1e-6,
        "attention_bias": False, "tie_word_embeddings": False, "hidden_act": "silu", "rope_scaling": None,
        "bos_token_id": tokenizer.token_to_id("<|im_start|>"), "eos_token_id": tokenizer.token_to_id("<|im_end|>"),
        "pad_token_id": tokenizer.token_to_id("<|endoftext|>"), "torch_dtype": "float32",
        "query_num": p.query_num, "image_size": 448, "drop_vision_last_layer": True, "use_image_id": True,
        "vision_batch_size": 16, "audio_pool_step": 5, "audio_chunk_length": 1.0, "stream_input": False,
        "init_vision": True, "init_audio": True, "init_tts": True,
        "slice_config": {"model_type": "minicpmv", "patch_size": 14, "max_slice_nums": 9, "scale_resolution": 448},
        "vision_config": {"model_type": "siglip_vision_model", "hidden_size": p.vision_hidden,
                          "intermediate_size": 4 * p.vision_hidden, "num_hidden_layers": p.vision_layers + 1,
                          "num_attention_heads": p.vision_heads, "image_size": 980, "patch_size": 14,
                          "hidden_act": "gelu_pytorch_tanh", "layer_norm_eps": 1e-6, "num_channels": 3},
        "audio_config": {"model_type": "whisper", "d_model": p.audio_width, "encoder_layers": p.audio_layers,
                         "encoder_attention_heads": p.audio_heads, "encoder_ffn_dim": 4 * p.audio_width,
                         "num_mel_bins": 80, "max_source_positions": 1500, "activation_function": "gelu"},
        "tts_config": {"model_type": "minicpmtts", "llm_dim": p.hidden, "hidden_size": p.talker_hidden,
                       "intermediate_size": 2 * p.talker_hidden, "num_hidden_layers": p.talker_layers,
                       "num_attention_heads": p.talker_heads, "num_key_value_heads": p.talker_heads,
                       "max_position_embeddings": 4096, "num_audio_tokens": 6562, "num_text_tokens": p.vocab,
                       "num_vq": 1, "audio_bos_token_id": tokenizer.token_to_id("<focus>"),
                       "text_eos_token_id": tokenizer.token_to_id("</perception>"), "normalize_projected_hidden": True,
                       "projector_type": "mlp", "condition_type": "hidden_text_merge", "backbone_model": "llama",
                       "hidden_act": "silu", "rms_norm_eps": 1e-6},
    }


def _randomize(module: torch.nn.Module) -> None:
    """Matrices ~ N(0, 1/fan_in) (activations keep their scale through the layers), vectors
    ~ N(0, 0.02), norms at one."""
    for name, param in module.named_parameters():
        with torch.no_grad():
            if "norm" in name or name.startswith("ln_"):
                param.fill_(1.0) if name.endswith("weight") else param.zero_()
            elif param.dim() >= 2:
                param.normal_(0.0, param[0].numel() ** -0.5)
            else:
                param.normal_(0.0, 0.02)


def _talker_weights(tts: dict[str, Any]) -> dict[str, torch.Tensor]:
    """`tts.*` as the release stores them: the head as weight-norm g and v, no backbone token table."""
    from omni_edge.export.models.minicpmo45.talker import HEAD_G, HEAD_V, Talker, TalkerConfig

    talker = Talker(TalkerConfig.from_json(tts, "tts_config"))
    _randomize(talker)
    state = {k: v for k, v in talker.state_dict().items() if k not in ("model.embed_tokens.weight", "head_code.0.weight")}
    v = talker.state_dict()["head_code.0.weight"]
    state[HEAD_V], state[HEAD_G] = v.clone(), v.norm(dim=1, keepdim=True) * 4.0  # peaked codes: a 4x wider head
    return {f"tts.{k}": t.contiguous() for k, t in state.items()}


def make_checkpoint(out: Path, preset: str = "tiny", seed: int = 0) -> Path:
    """A MiniCPM-o 4.5 checkpoint with random encoders and talker and a briefly trained LLM."""
    from safetensors.torch import save_file
    from transformers import PreTrainedTokenizerFast, Qwen3ForCausalLM

    from omni_edge.export.models.minicpmo45.audio import AudioEncoder, Projector
    from omni_edge.export.models.minicpmo45.config import read_config
    from omni_edge.export.models.minicpmo45.vision import Resampler, VisionTower

    p = preset_of(PRESETS, preset, "minicpmo-4.5")
    seed_everything(seed)
    texts = stdlib_corpus()
    tokenizer = train_tokenizer(texts, p.vocab, SPECIAL_TOKENS)
    out.mkdir(parents=True, exist_ok=True)
    (out / "config.json").write_text(json.dumps(release_config(p, tokenizer), indent=2) + "\n")
    config = read_config(out)
    llm_class: Any = Qwen3ForCausalLM
    llm = llm_class(config.llm_config()).float()
    losses = train_causal_lm(llm, tokenizer, texts[:200], p.train_steps, seed) if p.train_steps else []
    parts: dict[str, torch.nn.Module] = {
        "vpm": VisionTower(config.vision), "resampler": Resampler(p.query_num, p.hidden, p.vision_hidden),
        "apm": AudioEncoder(config.audio), "audio_projection_layer": Projector(p.audio_width, p.hidden)}
    weights: dict[str, torch.Tensor] = {}
    for name, module in parts.items():
        _randomize(module)
        weights |= {f"{name}.{k}": v.contiguous() for k, v in module.state_dict().items()}
    weights |= {f"llm.{k}": v.contiguous() for k, v in llm.state_dict().items()}
    weights |= _talker_weights(read_config(out).raw["tts_config"])
    save_file(weights, str(out / "model.safetensors"), metadata={"format": "pt"})
    fast: Any = PreTrainedTokenizerFast
    fast(tokenizer_object=tokenizer, model_max_length=8192, bos_token="<|im_start|>", eos_token="<|im_end|>",
         pad_token="<|endoftext|>", unk_token="<unk>").save_pretrained(out)
    tk = json.loads((out / "tokenizer_config.json").read_text())
    (out / "tokenizer_config.json").write_text(json.dumps({**tk, "chat_template": CHAT_TEMPLATE}, indent=2) + "\n")
    (out / "preprocessor_config.json").write_text(json.dumps(PREPROCESSOR, indent=2) + "\n")
    (out / "generation_config.json").write_text(json.dumps(
        {"eos_token_id": [tokenizer.token_to_id("<|im_end|>"), tokenizer.token_to_id("<|endoftext|>")],
         "do_sample": False}, indent=2) + "\n")
    write_token2wav(out, TOKEN2WAV[preset][0], TOKEN2WAV[preset][1], seed)
    write_record(out, {"arch": "minicpmo-4.5", "preset": preset, "seed": seed, "train_steps": p.train_steps,
                       "final_loss": round(losses[-1], 3) if losses else None})
    return out
