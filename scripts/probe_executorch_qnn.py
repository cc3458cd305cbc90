"""Probe: lower the text model's decode stage with ExecuTorch's Qualcomm backend (QnnQuantizer
16a8w + QnnPartitioner, SM8750) using the QNN libraries of the onnxruntime-qnn wheel, then run
the .pte on the emulated HTP through ExecuTorch. Prints the first failure, verbatim.

    .venv/bin/python scripts/probe_executorch_qnn.py [CHECKPOINT]

ExecuTorch looks for a QNN SDK under QNN_SDK_ROOT (and downloads one if unset); the wheel's
libraries are laid out as one in build/qnn-sdk so that nothing is downloaded.
"""

from __future__ import annotations

import os
import subprocess
import sys
import tempfile
import traceback
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def sdk_layout() -> Path:
    """build/qnn-sdk/lib/x86_64-linux-clang/* -> the wheel's QNN libraries."""
    import onnxruntime_qnn

    wheel = Path(onnxruntime_qnn.__file__).parent
    sdk = ROOT / "build" / "qnn-sdk"
    lib = sdk / "lib" / "x86_64-linux-clang"
    lib.mkdir(parents=True, exist_ok=True)
    for so in wheel.glob("*.so"):
        for name in {so.name, so.name.replace("libHtpPrepare", "libQnnHtpPrepare")}:
            if not (lib / name).exists():
                (lib / name).symlink_to(so)
    libs = wheel.parent / "onnxruntime_qnn.libs"  # the libraries' RPATH is $ORIGIN/../onnxruntime_qnn.libs
    if libs.exists() and not (sdk / "lib" / "onnxruntime_qnn.libs").exists():
        (sdk / "lib" / "onnxruntime_qnn.libs").symlink_to(libs)
    return sdk


def probe(checkpoint: Path) -> int:
    import torch
    from executorch.backends.qualcomm.quantizer.quantizer import QnnQuantizer, QuantDtype
    from executorch.backends.qualcomm.serialization.qc_schema import QcomChipset
    from executorch.backends.qualcomm.utils.utils import (
        generate_htp_compiler_spec,
        generate_qnn_executorch_compiler_spec,
        to_edge_transform_and_lower_to_qnn,
    )
    from omni_edge.export.decoder.graphs import BodyGraph, DecoderShape, body_example
    from torchao.quantization.pt2e.quantize_pt2e import convert_pt2e, prepare_pt2e
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(str(checkpoint), dtype=torch.float32).eval()
    shape = DecoderShape.from_config(model.config)
    body = BodyGraph(model, shape, reduce="matmul", rope_table=256).eval()
    example = body_example(shape, 1, 128)

    def sample(seed: int) -> tuple[torch.Tensor, ...]:
        """A decode step at position 40 over a cache holding 40 earlier (random) keys/values."""
        g = torch.Generator().manual_seed(seed)
        hidden = model.model.embed_tokens(torch.randint(0, shape.vocab, (1, 1), generator=g)).detach()
        past = [torch.randn(t.shape, generator=g) * 0.5 for t in example[3:]]
        mask = torch.full(example[2].shape, -100.0)
        mask[..., :40] = 0
        mask[..., -1] = 0
        return (hidden, torch.tensor([[40]]), mask, *past)

    example = sample(0)
    step = "export"
    try:
        graph = torch.export.export(body, example, strict=False).module()
        step = "quantize (QnnQuantizer 16a8w, per-channel linear)"
        quantizer = QnnQuantizer(soc_model=QcomChipset.SM8750)
        quantizer.set_default_quant_config(quant_dtype=QuantDtype.use_16a8w, is_linear_per_channel=True)
        prepared = prepare_pt2e(graph, quantizer)
        for seed in range(1, 9):
            prepared(*sample(seed))
        quantized = convert_pt2e(prepared)
        step = "lower (QnnPartitioner, SM8750 / HTP v79)"
        spec = generate_qnn_executorch_compiler_spec(soc_model=QcomChipset.SM8750,
                                                     backend_options=generate_htp_compiler_spec(use_fp16=False))
        edge = to_edge_transform_and_lower_to_qnn(quantized, example, spec)
        step = "to_executorch"
        program = edge.to_executorch()
        step = "run on the emulated HTP (ExecuTorch pybindings)"
        from executorch.extension.pybindings.portable_lib import _load_for_executorch_from_buffer

        out = _load_for_executorch_from_buffer(program.buffer).forward(example)[0]
        ref = body(*example)[0]
        sqnr = 10 * torch.log10(ref.pow(2).sum() / (ref - out).pow(2).sum())
        print(f"OK: decode stage lowered and run on the emulated HTP, hidden-state SQNR {float(sqnr):.1f} dB")
        return 0
    except Exception:
        print(f"FAILED at: {step}")
        traceback.print_exc(limit=3)
        return 1


def main() -> int:
    if os.environ.get("QNN_SDK_ROOT") is None:  # re-exec: the QNN libraries are found at load time
        sdk = sdk_layout()
        lib = sdk / "lib" / "x86_64-linux-clang"
        env = {**os.environ, "QNN_SDK_ROOT": str(sdk), "LD_LIBRARY_PATH": f"{lib}:{os.environ.get('LD_LIBRARY_PATH', '')}"}
        return subprocess.call([sys.executable, *sys.argv], env=env)
    if len(sys.argv) > 1:
        return probe(Path(sys.argv[1]))
    from omni_edge.export.registry import make_checkpoint

    with tempfile.TemporaryDirectory() as tmp:
        return probe(make_checkpoint(Path(tmp) / "ckpt", preset="tiny", train_steps=0))


if __name__ == "__main__":
    sys.exit(main())
