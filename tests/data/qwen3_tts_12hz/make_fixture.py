"""Writes the Qwen3-TTS 12 Hz decoder fixture of tests/export/models/qwen3_tts/test_qwen3_tts_codec.py: a small decoder
built by the real implementation (the `qwen-tts` package) with random weights, saved as a
Qwen3-TTS release saves its speech tokenizer (config.json + model.safetensors with `decoder.*`),
and its output for fixed codes (reference.safetensors: codes [1, 16, 30], the wav of all 30
frames and of the first 12).

Not run by the tests (qwen-tts needs transformers 4.57, the project runs 5.x). To regenerate:
    python3.11 -m venv /tmp/qvenv && /tmp/qvenv/bin/pip install torch==2.13.0 transformers==4.57.3 \
        accelerate==1.12.0 einops librosa soundfile sox onnxruntime safetensors
    /tmp/qvenv/bin/pip install --no-deps qwen-tts==0.1.1
    /tmp/qvenv/bin/python tests/data/qwen3_tts_12hz/make_fixture.py tests/data/qwen3_tts_12hz
"""

import json
import sys
from pathlib import Path

import torch
from safetensors.torch import save_file

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from qwen_tts_side import randomize_decoder, stub_torchaudio

stub_torchaudio()

from qwen_tts.core.tokenizer_12hz.configuration_qwen3_tts_tokenizer_v2 import (  # noqa: E402
    Qwen3TTSTokenizerV2DecoderConfig,
)
from qwen_tts.core.tokenizer_12hz.modeling_qwen3_tts_tokenizer_v2 import Qwen3TTSTokenizerV2Decoder  # noqa: E402

# The release's structure (split RVQ, 4 upsampling blocks of 8/5/4/3 and 2 of 2: 1920 samples per
# frame) at a small width; codebook_size 256 is the tiny preset's, so the talker's codes fit.
CONFIG = dict(codebook_size=256, codebook_dim=32, latent_dim=48, hidden_size=32, intermediate_size=64, head_dim=16,
              num_attention_heads=4, num_key_value_heads=2, num_hidden_layers=2, num_quantizers=16, sliding_window=8,
              rope_theta=10000, rms_norm_eps=1e-5, layer_scale_initial_scale=0.01, max_position_embeddings=8000,
              upsample_rates=[8, 5, 4, 3], upsampling_ratios=[2, 2], decoder_dim=32)


def main(out: Path) -> None:
    out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(0)
    config = Qwen3TTSTokenizerV2DecoderConfig(**CONFIG)
    config._attn_implementation = "eager"
    model = Qwen3TTSTokenizerV2Decoder(config).eval()
    codes = randomize_decoder(model, lambda: torch.randint(0, CONFIG["codebook_size"], (1, 16, 30)))
    with torch.no_grad():
        wav, wav12 = model(codes), model(codes[..., :12])
    save_file({f"decoder.{k}": v.contiguous() for k, v in model.state_dict().items()}, str(out / "model.safetensors"))
    speech_tokenizer = {"model_type": "qwen3_tts_tokenizer_12hz", "decoder_config": CONFIG,
                        "encoder_valid_num_quantizers": 16, "input_sample_rate": 24000, "output_sample_rate": 24000,
                        "decode_upsample_rate": 1920, "encode_downsample_rate": 1920}
    (out / "config.json").write_text(json.dumps(speech_tokenizer, indent=2) + "\n")
    save_file({"codes": codes, "wav": wav, "wav12": wav12}, str(out / "reference.safetensors"))


if __name__ == "__main__":
    main(Path(sys.argv[1]))
