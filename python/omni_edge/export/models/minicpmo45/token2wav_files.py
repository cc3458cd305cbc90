"""MiniCPM-o 4.5's token2wav files as a release keeps them, `assets/token2wav/` beside config.json:
flow.yaml (hyperpyyaml: the flow's classes and sizes under `flow`), flow.pt (the flow's state
dict), hift.pt (HiFT's, each name under `generator.`). A release also ships the voice models
(speech_tokenizer_v2_25hz.onnx, campplus.onnx) and its default voice; `make-checkpoint` writes
only the three files the decoding needs, at the preset's sizes, with random weights.

The reader takes flow.yaml's sizes through a YAML loader that reads `!new:` tags as mappings (no
class is instantiated from the file), and HiFT's from its tensors' shapes (a release builds it
from code)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from omni_edge.export.models.minicpmo45.flow import Flow, FlowConfig, random_flow
from omni_edge.export.models.minicpmo45.hift import Hift, HiftConfig, random_hift
from omni_edge.export.models.minicpmo45.token2wav import Token2Wav
from omni_edge.files import atomic_output, write_text_atomic

DIRECTORY = Path("assets") / "token2wav"
NOISE_SEED = 0
FLOW_YAML = """flow: !new:cosyvoice2.flow.flow.CausalMaskedDiffWithXvec
    input_size: {width}
    output_size: {mel_bins}
    spk_embed_dim: {speaker_dim}
    output_type: 'mel'
    vocab_size: {vocab}
    encoder: !new:cosyvoice2.transformer.upsample_encoder_v2.UpsampleConformerEncoderV2
        input_size: {width}
        output_size: {width}
        input_layer: 'linear'
        pre_lookahead_len: {lookahead}
        num_blocks: {blocks}
        num_up_blocks: {up_blocks}
        up_stride: 2
        up_scale_factor: 2
        attention_heads: {heads}
        pos_enc_layer_type: 'rel_pos_espnet'
        selfattention_layer_type: 'rel_selfattn'
        key_bias: true
        linear_units: {ffn}
        dropout_rate: 0.1
        positional_dropout_rate: 0.1
        attention_dropout_rate: 0.1
        normalize_before: true
    decoder: !new:cosyvoice2.flow.flow_matching.CausalConditionalCFM
        inference_cfg_rate: {cfg_rate}
        estimator: !new:cosyvoice2.flow.decoder_dit.DiT
            in_channels: {dit_in}
            out_channels: {mel_bins}
            mlp_ratio: 4.0
            depth: {dit_depth}
            num_heads: {dit_heads}
            head_dim: {dit_head_dim}
            hidden_size: {dit_width}
"""


def write_token2wav(checkpoint: Path, flow: FlowConfig, hift: HiftConfig, seed: int) -> Path:
    directory = checkpoint / DIRECTORY
    directory.mkdir(parents=True, exist_ok=True)
    fields = {**flow.__dict__, "dit_in": 4 * flow.mel_bins}
    write_text_atomic(directory / "flow.yaml", FLOW_YAML.format(**fields))
    with atomic_output(directory / "flow.pt") as part:
        torch.save(random_flow(flow, seed).state_dict(), part)
    with atomic_output(directory / "hift.pt") as part:
        torch.save({f"generator.{k}": v for k, v in random_hift(hift, seed + 1).state_dict().items()}, part)
    return directory


def _read_yaml(path: Path) -> dict[str, Any]:
    import yaml  # type: ignore[import-untyped]  # PyYAML: transformers' own dependency

    class _Loader(yaml.SafeLoader):  # type: ignore[misc]
        pass

    def _new(loader: yaml.SafeLoader, suffix: str, node: yaml.Node) -> dict[str, Any]:
        mapping: dict[str, Any] = loader.construct_mapping(node, deep=True)  # type: ignore[arg-type]
        return {"_class": suffix, **mapping}

    _Loader.add_multi_constructor("!new:", _new)
    try:
        data = yaml.load(path.read_text(), Loader=_Loader)  # a SafeLoader: tags become mappings, nothing is built
    except (OSError, yaml.YAMLError) as exc:
        raise ValueError(f"{path}: not a readable flow.yaml ({exc})") from None
    if not isinstance(data, dict) or not isinstance(data.get("flow"), dict):
        raise ValueError(f"{path}: no `flow` in it")
    return data["flow"]  # type: ignore[no-any-return]


def flow_config(path: Path) -> FlowConfig:
    """A flow.yaml's sizes, or a ValueError naming what is missing."""
    f = _read_yaml(path)
    try:
        e, d = f["encoder"], f["decoder"]
        est = d["estimator"]
        return FlowConfig(vocab=int(f["vocab_size"]), width=int(e["output_size"]), heads=int(e["attention_heads"]),
                          ffn=int(e["linear_units"]), blocks=int(e["num_blocks"]), up_blocks=int(e["num_up_blocks"]),
                          lookahead=int(e["pre_lookahead_len"]), mel_bins=int(f["output_size"]),
                          speaker_dim=int(f["spk_embed_dim"]), dit_width=int(est["hidden_size"]),
                          dit_depth=int(est["depth"]), dit_heads=int(est["num_heads"]), dit_head_dim=int(est["head_dim"]),
                          cfg_rate=float(d["inference_cfg_rate"]))
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{path}: flow.yaml lacks or mistypes {exc}") from None


def load_token2wav(checkpoint: Path, steps: int = 10) -> Token2Wav:
    """The token2wav of a MiniCPM-o 4.5 directory (`assets/token2wav/`)."""
    directory = checkpoint / DIRECTORY
    for name in ("flow.yaml", "flow.pt", "hift.pt"):
        if not (directory / name).is_file():
            raise ValueError(f"{checkpoint}: no {DIRECTORY / name} (token2wav's files)")
    flow = Flow(flow_config(directory / "flow.yaml")).eval()
    state = torch.load(directory / "flow.pt", map_location="cpu", weights_only=True)
    flow.load_state_dict(state, strict=True)
    # The decoder's noise is not in flow.pt: upstream draws it (standard normal) whenever it builds
    # the model; here it is drawn from a fixed seed, so that every load decodes alike.
    generator = torch.Generator().manual_seed(NOISE_SEED)
    flow.decoder.rand_noise.copy_(torch.randn(flow.decoder.rand_noise.shape, generator=generator))
    hift_state = {k.removeprefix("generator."): v for k, v in
                  torch.load(directory / "hift.pt", map_location="cpu", weights_only=True).items()}
    base = int(hift_state["conv_pre.parametrizations.weight.original1"].shape[0])
    f0 = int(hift_state["f0_predictor.condnet.0.parametrizations.weight.original1"].shape[0])
    hift = Hift(HiftConfig(base_channels=base, f0_channels=f0)).eval()
    hift.load_state_dict(hift_state, strict=True)
    return Token2Wav(flow, hift, steps)
