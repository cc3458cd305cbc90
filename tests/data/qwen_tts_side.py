"""What the qwen-tts fixture scripts share (tests/data/*/make_fixture.py). They run in the qwen-tts
side venv (transformers 4.57), never in the tests."""

import importlib.machinery
import sys
import types
from collections.abc import Callable

import torch


def stub_torchaudio() -> None:
    """qwen_tts imports torchaudio for its 25 Hz tokenizer only; there is no torchaudio for this torch."""
    for name in ("torchaudio", "torchaudio.compliance", "torchaudio.compliance.kaldi"):
        sys.modules[name] = types.ModuleType(name)
        sys.modules[name].__spec__ = importlib.machinery.ModuleSpec(name, None)
    sys.modules["torchaudio"].compliance = sys.modules["torchaudio.compliance"]  # type: ignore[attr-defined]
    sys.modules["torchaudio.compliance"].kaldi = sys.modules["torchaudio.compliance.kaldi"]  # type: ignore[attr-defined]


@torch.no_grad()
def randomize_decoder(decoder: torch.nn.Module, make_codes: Callable[[], torch.Tensor]) -> torch.Tensor:
    """A 12 Hz codec decoder's weights at the scales a trained one has, and its output at speech
    level (std 0.2 before the clamp) for the codes `make_codes` draws, which are returned."""
    for name, p in decoder.named_parameters():
        if "cluster_usage" in name:
            p.copy_(torch.rand_like(p) * 2 + 0.5)
        elif name.endswith(("alpha", "beta")):
            p.copy_(torch.randn_like(p) * 0.1)
        elif "scale" in name or name.endswith("gamma"):
            p.copy_(torch.full_like(p, 0.1))
        elif p.dim() > 1:
            p.copy_(torch.randn_like(p) / p.shape[1] ** 0.5)
        else:
            p.copy_(torch.randn_like(p) * 0.02 + (1.0 if "norm" in name else 0.0))
    codes = make_codes()
    last = decoder.decoder[-1]  # type: ignore[index]
    seen: dict[str, torch.Tensor] = {}
    hook = last.register_forward_hook(lambda _m, _i, o: seen.setdefault("out", o))
    decoder(codes)
    hook.remove()
    scale = 0.2 / float(seen["out"].std())
    last.conv.weight.mul_(scale)
    last.conv.bias.mul_(scale)
    return codes
