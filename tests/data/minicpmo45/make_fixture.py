"""Writes the MiniCPM-o 4.5 thinker fixture of tests/export/models/minicpmo45/test_minicpmo45_reference.py:
a tiny checkpoint in the release's layout (`omni-edge make-checkpoint --arch minicpmo-4.5`), loaded
into vLLM-Omni 0.30.0's own thinker (`MiniCPMO45OmniLLMForConditionalGeneration`, built by its own
__init__, its weights through its own load_weights), and what that code makes of real media:
its image processor's slices, tgt_sizes and placeholder text for each image, its
get_vision_hidden_states and get_audio_hidden_states (reference.safetensors + reference.json, beside
the checkpoint/ directory; each slice's pixels kept at every STRIDE-th column).

vLLM itself is not importable here (no GPU build): its modules are stubbed, the thinker's file is
loaded by path, and its LLM (a vLLM Qwen3) is left out: the encoders, resampler, projector and
processor are vLLM-Omni's code as published; the LLM is transformers' Qwen3 on both sides.

And an utterance through vLLM-Omni's own token2wav streaming (BatchedToken2Wav: the bridge's
windows, its flow and HiFT caches, trims and cross-fades) over the Step-Audio2 flow, whose
classes vLLM-Omni loads from `minicpmo-utils` (CosyVoice2's conformer, DiT and CFM), at a
smaller depth, on random weights.

Not run by the tests. To regenerate (the wheels are read, never installed into the project):
    pip download --no-deps vllm-omni==0.30.0 -d /tmp/vo && unzip -q /tmp/vo/*.whl -d /tmp/vo/src
    pip download --no-deps --no-binary :all: minicpmo-utils==1.0.0 -d /tmp/mu && tar xzf /tmp/mu/*.tar.gz -C /tmp/mu
    pip install --target /tmp/mu/site einops
    PYTHONPATH=/tmp/mu/site .venv/bin/python tests/data/minicpmo45/make_fixture.py /tmp/vo/src \
        /tmp/mu/minicpmo_utils-1.0.0/src tests/data/minicpmo45
"""

import importlib.util
import json
import logging
import shutil
import sys
import types
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load_file, save_file

ROOT = Path(__file__).resolve().parents[3]
sys.path.insert(0, str(ROOT / "tests"))
from minicpmo45_media import (  # noqa: E402
    HIFT_CHECK,
    T2W_SEED,
    audio_inputs,
    check_codes,
    check_mels,
    check_voice,
    image_inputs,
    t2w_config,
)

MODELS = "vllm_omni/model_executor/models/minicpmo_4_5"
T2W_STEPS = 4  # Euler steps of the token2wav check (the release's 10 take 2.5x as long, same code)
TALKER_FRAMES = 80  # greedy codes of the talker (the end is masked for the first 50)
STRIDE = 29  # of the slices' pixel strips kept: enough to tell a resize or crop apart, 1/29 of the bytes


class _Anything:
    def __init__(self, *args: object, **kwargs: object) -> None:
        pass

    def __class_getitem__(cls, item: object) -> type:
        return cls


class _Stub(types.ModuleType):
    """A module whose every attribute is a placeholder class (vLLM's types in annotations and bases)."""

    def __getattr__(self, name: str) -> type:
        if name.startswith("__"):
            raise AttributeError(name)
        value = type(name, (_Anything,), {})
        setattr(self, name, value)
        return value


def _stub(name: str, **attrs: object) -> None:
    module = _Stub(name)
    module.__path__ = []  # type: ignore[attr-defined]
    module.__dict__.update(attrs)
    sys.modules[name] = module


def _load(name: str, path: Path) -> types.ModuleType:
    spec = importlib.util.spec_from_file_location(name, path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    sys.modules[name] = module
    spec.loader.exec_module(module)
    return module


class _LlamaShim(torch.nn.Module):
    """Where vLLM's LlamaModel would be (the talker's backbone): transformers' Llama on the same config."""

    def __init__(self, *, vllm_config: object, prefix: str = "") -> None:
        from transformers import LlamaModel

        super().__init__()
        self.m = LlamaModel(vllm_config.model_config.hf_config)  # type: ignore[attr-defined]
        self.make_empty_intermediate_tensors = None

    def forward(self, inputs_embeds: torch.Tensor, positions: torch.Tensor, **_: object) -> torch.Tensor:
        return self.m(inputs_embeds=inputs_embeds[None], position_ids=positions[None], use_cache=False).last_hidden_state[0]

    def load_weights(self, weights: list[tuple[str, torch.Tensor]]) -> set[str]:
        given = dict(weights)
        _, unexpected = self.m.load_state_dict(given, strict=False)
        return set(given) - set(unexpected)


class _Llm(torch.nn.Module):
    """Where vLLM's Qwen3 would be: only its hidden size is read by the thinker's __init__."""

    def __init__(self, hidden: int) -> None:
        super().__init__()
        self.config = types.SimpleNamespace(hidden_size=hidden)
        self.make_empty_intermediate_tensors = None

    def load_weights(self, weights: object) -> set[str]:
        return set()


def upstream_thinker(src: Path, checkpoint: Path) -> tuple[object, types.ModuleType]:
    for name in ("vllm", "vllm.config", "vllm.config.multimodal", "vllm.inputs", "vllm.model_executor",
                 "vllm.model_executor.models", "vllm.model_executor.models.interfaces", "vllm.multimodal.inputs",
                 "vllm.multimodal.parse", "vllm.multimodal.processing", "vllm.sequence", "vllm.utils",
                 "vllm.utils.tensor_schema", "vllm_omni", "vllm_omni.model_executor", "vllm_omni.model_executor.models",
                 "vllm_omni.model_executor.models.model_local_kv", "vllm_omni.model_executor.models.minicpmo_4_5",
                 "vllm_omni.model_executor.models.minicpmo_4_5.duplex", "vllm.v1", "vllm.v1.sample",
                 "vllm.v1.sample.sampler", "vllm_omni.engine", "vllm_omni.engine.duplex",
                 "vllm_omni.engine.duplex.intermediate", "vllm_omni.model_executor.models.output_templates",
                 "vllm_omni.platforms"):
        _stub(name)
    _stub("vllm.model_executor.models.llama", LlamaModel=_LlamaShim)
    config = json.loads((checkpoint / "config.json").read_text())
    registry = types.SimpleNamespace(register_processor=lambda *a, **k: (lambda cls: cls))
    _stub("vllm.logger", init_logger=logging.getLogger)
    _stub("vllm.multimodal", MULTIMODAL_REGISTRY=registry)
    _stub("vllm.model_executor.models.utils", _merge_multimodal_embeddings=None, flatten_bn=None,
          init_vllm_registered_model=lambda **k: _Llm(config["hidden_size"]),
          maybe_prefix=lambda prefix, name: f"{prefix}.{name}" if prefix else name)
    _load("vllm_omni.model_executor.models.minicpmo_4_5.duplex.compat", src / MODELS / "duplex/compat.py")
    thinker_file = _load("minicpmo_4_5_omni_llm", src / MODELS / "minicpmo_4_5_omni_llm.py")
    hf_config = thinker_file.MiniCPMOConfig(**config)
    assert thinker_file.get_version_by_config(hf_config) == (4, 5)
    limits = types.SimpleNamespace(get_limit_per_prompt=lambda modality: 1)
    vllm_config = types.SimpleNamespace(model_config=types.SimpleNamespace(
        hf_config=hf_config, multimodal_config=limits, _attn_implementation="eager"))
    model = thinker_file.MiniCPMO45OmniLLMForConditionalGeneration(vllm_config=vllm_config)
    # The outer model routes tts.* to the talker (minicpmo_4_5_omni.py), the rest here.
    weights = {k: v for k, v in load_file(str(checkpoint / "model.safetensors")).items() if not k.startswith("tts.")}
    loaded = model.load_weights(weights.items())
    expected = {k for k in weights if not k.startswith("llm.")}
    assert expected <= loaded, sorted(expected - loaded)[:5]
    for name, module in (("vpm", model.vpm), ("resampler", model.resampler), ("apm", model.apm),
                         ("audio_projection_layer", model.audio_projection_layer)):
        own = {k for k in weights if k.startswith(name + ".")}
        assert {f"{name}.{k}" for k in module.state_dict()} == own, name  # every tensor has its place
    return model.eval(), thinker_file


def upstream_talker(src: Path, checkpoint: Path) -> object:
    """vLLM-Omni's MiniCPMO45OmniTTSForConditionalGeneration on the checkpoint's tts_config (as
    vLLM-Omni wraps a minicpmtts dict: a plain PretrainedConfig), its weights through its loader."""
    from transformers import PretrainedConfig

    # The package's __init__ holds only constants the talker's file reads: load it for real.
    _load("vllm_omni.model_executor.models.minicpmo_4_5", src / MODELS / "__init__.py")
    tts_file = _load("minicpmo_4_5_omni_tts", src / MODELS / "minicpmo_4_5_omni_tts.py")
    config = json.loads((checkpoint / "config.json").read_text())

    class _Vc:
        def __init__(self, hf: object) -> None:
            self.model_config = types.SimpleNamespace(hf_config=hf)

        def with_hf_config(self, hf: object, architectures: object = None) -> "_Vc":
            return _Vc(hf)

    talker = tts_file.MiniCPMO45OmniTTSForConditionalGeneration(
        vllm_config=_Vc(types.SimpleNamespace(tts_config=PretrainedConfig(**config["tts_config"]))))
    weights = load_file(str(checkpoint / "model.safetensors"))
    loaded = talker.load_weights(weights.items())
    assert "head_code.0.weight" in loaded and "emb_code.0.weight" in loaded and "projector_semantic.linear1.weight" in loaded
    return talker.eval()


def upstream_hift(src: Path) -> object:
    """vLLM-Omni's HiFTGenerator as its Step-Audio2 token2wav builds it (`_build_hift`, with its
    `_ConvRNNF0Predictor`), both taken from step_audio2_token2wav.py by their source (that module
    itself imports s3tokenizer, torchaudio and hyperpyyaml, absent here)."""
    import ast

    _stub("vllm.logger", init_logger=logging.getLogger)
    _load("vllm_omni.model_executor.models.common.snake_activation", src / "vllm_omni/model_executor/models/common/snake_activation.py")
    hifigan = _load("cosyvoice3_hifigan", src / "vllm_omni/model_executor/models/cosyvoice3/code2wav_core/hifigan.py")
    path = src / "vllm_omni/model_executor/models/step_audio2/step_audio2_token2wav.py"
    tree = ast.parse(path.read_text())
    wanted = [n for n in tree.body if getattr(n, "name", "") in ("_ConvRNNF0Predictor", "_build_hift")]
    assert len(wanted) == 2
    from torch import nn
    from torch.nn.utils.parametrizations import weight_norm

    scope: dict[str, object] = {"nn": nn, "torch": torch, "weight_norm": weight_norm, "HiFTGenerator": hifigan.HiFTGenerator}
    exec(compile(ast.Module(body=wanted, type_ignores=[]), str(path), "exec"), scope)  # upstream's own two definitions
    return scope["_build_hift"]().eval()  # type: ignore[operator]


@torch.no_grad()
def hift_outputs(src: Path) -> dict[str, torch.Tensor]:
    """Two chunks through vLLM-Omni's HiFT on the random weights of `random_hift()`: the first
    alone, the second with the first's last 8 mel frames before it and its source tail as the
    cache (Step-Audio2's streaming), torch seeded before each (its noise is torch's)."""
    from omni_edge.export.models.minicpmo45.hift import random_hift

    hift = upstream_hift(src)
    missing, unexpected = hift.load_state_dict(random_hift().state_dict(), strict=False)  # type: ignore[attr-defined]
    assert not missing and not unexpected, (missing, unexpected)
    first, second = check_mels()
    torch.manual_seed(HIFT_CHECK[0])
    speech1, source1 = hift.inference(first)  # type: ignore[attr-defined]
    torch.manual_seed(HIFT_CHECK[1])
    speech2, _ = hift.inference(torch.cat([first[:, :, -8:], second], dim=2), source1[:, :, -3840:])  # type: ignore[attr-defined]
    return {"hift.speech1": speech1.contiguous(), "hift.speech2": speech2.contiguous()}


def upstream_token2wav(src: Path, utils: Path, flow_config: object, flow_state: dict[str, torch.Tensor],
                       hift_state: dict[str, torch.Tensor], noise: torch.Tensor) -> tuple[object, types.ModuleType]:
    """vLLM-Omni's BatchedToken2Wav over the Step-Audio2 flow (minicpmo-utils' CosyVoice2 classes, as
    its flow.yaml builds them, at `flow_config`'s sizes) and vLLM-Omni's HiFT, on the given weights."""
    hift = upstream_hift(src)
    hift.load_state_dict(hift_state, strict=False)  # type: ignore[attr-defined]
    package = types.ModuleType("stepaudio2")  # its __init__ imports the S3 tokenizer: skipped
    package.__path__ = [str(utils / "stepaudio2")]  # type: ignore[attr-defined]
    sys.modules["stepaudio2"] = package
    from stepaudio2.cosyvoice2.flow.decoder_dit import DiT
    from stepaudio2.cosyvoice2.flow.flow import CausalMaskedDiffWithXvec
    from stepaudio2.cosyvoice2.flow.flow_matching import CausalConditionalCFM
    from stepaudio2.cosyvoice2.transformer.upsample_encoder_v2 import UpsampleConformerEncoderV2

    c: Any = flow_config
    encoder = UpsampleConformerEncoderV2(input_size=c.width, output_size=c.width, pre_lookahead_len=c.lookahead,
                                         num_blocks=c.blocks, num_up_blocks=c.up_blocks, up_stride=2, up_scale_factor=2,
                                         attention_heads=c.heads, linear_units=c.ffn, key_bias=True)
    dit = DiT(in_channels=4 * c.mel_bins, out_channels=c.mel_bins, mlp_ratio=4.0, depth=c.dit_depth,
              num_heads=c.dit_heads, head_dim=c.dit_head_dim, hidden_size=c.dit_width)
    flow = CausalMaskedDiffWithXvec(input_size=c.width, output_size=c.mel_bins, spk_embed_dim=c.speaker_dim,
                                    vocab_size=c.vocab, encoder=encoder,
                                    decoder=CausalConditionalCFM(dit, inference_cfg_rate=c.cfg_rate)).eval()
    flow.load_state_dict(flow_state, strict=True)
    flow.decoder.rand_noise.copy_(noise)
    _stub("vllm.platforms", current_platform=types.SimpleNamespace(is_cuda=lambda: False))
    package_init = _load("vllm_omni.model_executor.models.minicpmo_4_5", src / MODELS / "__init__.py")
    package_init.__path__ = [str(src / MODELS)]  # type: ignore[attr-defined]  # its relative imports
    batched = _load("vllm_omni.model_executor.models.minicpmo_4_5.batched_token2wav", src / MODELS / "batched_token2wav.py")
    token2wav = types.SimpleNamespace(flow=flow, hift=hift, float16=False, n_timesteps=T2W_STEPS, mel_cache_len=8,
                                      source_cache_len=3840, speech_window=torch.from_numpy(np.hamming(7680).astype(np.float32)))
    return batched.BatchedToken2Wav(token2wav), batched


@torch.no_grad()
def token2wav_samples(src: Path, utils: Path) -> dict[str, torch.Tensor]:
    """An utterance of codes through vLLM-Omni's own streaming (its bridge's windows, setup_batch,
    decode_batch), torch seeded before each window (HiFT's noise)."""
    from omni_edge.export.models.minicpmo45.flow import random_flow
    from omni_edge.export.models.minicpmo45.hift import random_hift
    from omni_edge.export.models.minicpmo45.token2wav import windows
    config = t2w_config()
    flow = random_flow(config)  # type: ignore[arg-type]
    streamer, batched = upstream_token2wav(src, utils, config, flow.state_dict(), random_hift().state_dict(),
                                           flow.decoder.rand_noise)
    voice: Any = check_voice()
    features = batched.PromptFeatures(("voice", "voice"), voice.tokens, voice.speaker, voice.mel)
    states = streamer.setup_batch(features, 1)  # type: ignore[attr-defined]
    out = []
    for i, (window, last) in enumerate(windows(check_codes())):
        torch.manual_seed(T2W_SEED + i)
        audios, states = streamer.decode_batch(torch.tensor([window]), features, states, last_chunk=last)  # type: ignore[attr-defined]
        out.append(audios[0])
    return {"token2wav.samples": torch.cat(out).contiguous()}


@torch.no_grad()
def talker_codes(talker: object, ids: torch.Tensor, hidden: torch.Tensor, frames: int, min_codes: int = 50) -> list[int]:
    """Greedy codes through vLLM-Omni's own condition, backbone call and head, the end masked for
    the deploy config's min_tokens (50) as its sampler does."""
    embeds = talker._build_condition_embeddings(ids, hidden)  # type: ignore[attr-defined]
    codes: list[int] = []
    eos = talker._codec_eos_id  # type: ignore[attr-defined]
    for step in range(frames):
        rows = embeds if not codes else torch.cat([embeds, talker.emb_code[0](torch.tensor(codes))])  # type: ignore[attr-defined]
        h = talker.forward(input_ids=None, positions=torch.arange(rows.shape[0]), inputs_embeds=rows)  # type: ignore[attr-defined]
        logits = talker.compute_logits(h[-1:])[0]  # type: ignore[attr-defined]
        if step < min_codes:
            logits[eos] = float("-inf")
        code = int(torch.argmax(logits))
        if code == eos:
            break
        codes.append(code)
    return codes


def main(src: Path, utils: Path, out: Path) -> None:
    from omni_edge.export.models.minicpmo45.checkpoint import make_checkpoint

    tmp = out.with_name(out.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    make_checkpoint(tmp, preset="tiny", seed=0)
    model, thinker_file = upstream_thinker(src, tmp)
    torch.set_grad_enabled(False)
    c = model.config
    processor = thinker_file.MiniCPMVImageProcessor(max_slice_nums=c.slice_config.max_slice_nums,
                                                    scale_resolution=c.image_size, patch_size=c.vision_config.patch_size,
                                                    use_image_id=c.use_image_id, image_feature_size=c.query_num)
    tensors: dict[str, torch.Tensor] = {}
    cases: dict[str, list[dict[str, object]]] = {"images": [], "audio": []}
    for i, (name, image) in enumerate(image_inputs()):
        got = processor.preprocess([image], return_tensors=None)
        pixels = [torch.from_numpy(p) for p in got["pixel_values"][0]]
        tgt = torch.from_numpy(np.asarray(got["tgt_sizes"][0])).long()
        embeds = model.get_vision_hidden_states({"pixel_values": pixels, "tgt_sizes": tgt})
        tensors[f"image.{name}.embeddings"] = embeds.flatten(0, 1).contiguous()
        for j, p in enumerate(pixels):
            tensors[f"image.{name}.strip{j}"] = p[..., ::STRIDE].contiguous()
        cases["images"].append({"name": name, "size": list(image.size), "tgt_sizes": tgt.tolist(),
                                "grid": processor.get_sliced_grid(image.size, c.slice_config.max_slice_nums),
                                "placeholder": processor.get_slice_image_placeholder(image.size, image_idx=i)})
    extractor = __import__("transformers").WhisperFeatureExtractor(feature_size=80)
    for name, samples in audio_inputs():
        pieces, lens = [], []
        for start in range(0, len(samples), 480000):  # the release processor's 30 s pieces
            got = extractor(samples[start:start + 480000], sampling_rate=16000, return_attention_mask=True,
                            padding="max_length", return_tensors="pt")
            n = int(got["attention_mask"][0].sum())
            pieces.append(got["input_features"][0, :, :n])
            lens.append(n)
        embeds = model.get_audio_hidden_states({"audio_features": pieces, "audio_feature_lens": [torch.tensor(lens)]})
        tensors[f"audio.{name}.embeddings"] = embeds[0].contiguous()
        cases["audio"].append({"name": name, "samples": len(samples), "mel_frames": lens})
    shutil.rmtree(out / "checkpoint", ignore_errors=True)
    out.mkdir(parents=True, exist_ok=True)
    shutil.move(str(tmp), str(out / "checkpoint"))
    # The talker on the thinker reference's spoken reply to the roadmap's request.
    from omni_edge.export.models.minicpmo45.reference import Media, generate, load_thinker

    thinker = load_thinker(out / "checkpoint")
    (_, red), (_, tone) = image_inputs()[0], audio_inputs()[0]
    _, reply = generate(thinker, [Media("image", red), Media("audio", tone)], "What do you see and hear?", 12,
                        speech=True, ignore_stop=True)
    torch.set_grad_enabled(False)
    talker = upstream_talker(src, out / "checkpoint")
    ids = torch.tensor(reply.ids)
    tensors["talker.ids"], tensors["talker.hidden"] = ids, reply.hidden.contiguous()
    codes = talker_codes(talker, ids, reply.hidden, TALKER_FRAMES)
    tensors["talker.codes"] = torch.tensor(codes, dtype=torch.int64)
    cases["talker"] = [{"frames": TALKER_FRAMES, "codes": len(codes)}]
    tensors |= hift_outputs(src)
    tensors |= token2wav_samples(src, utils)
    save_file(tensors, str(out / "reference.safetensors"))
    (out / "reference.json").write_text(json.dumps({"upstream": "vllm-omni 0.30.0", "cases": cases}, indent=1) + "\n")
    print(f"wrote {out / 'checkpoint'}: {len(tensors)} reference tensors")


if __name__ == "__main__":
    main(Path(sys.argv[1]), Path(sys.argv[2]), Path(sys.argv[3]))
