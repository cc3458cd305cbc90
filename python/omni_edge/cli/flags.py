"""Every flag two commands share, declared once: its name, type, range, default and help. A
command group adds the ones it takes; a value out of range is refused by argparse, naming the
flag, before any work (never wrapped into range by the native side)."""

from __future__ import annotations

import argparse
import math
from collections.abc import Callable
from pathlib import Path
from typing import Any

from omni_edge.export.options import FORMATS, MAX_THREADS, TARGETS, formats_of
from omni_edge.runtime.request import GREEDY_BELOW
from omni_edge.socs import SOCS

# ---- value types -------------------------------------------------------------------------------

def whole(lo: int, hi: int) -> Callable[[str], int]:
    """A whole number in [lo, hi]."""
    def parse(text: str) -> int:
        try:
            value = int(text)
        except ValueError:
            raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
        if not lo <= value <= hi:
            raise argparse.ArgumentTypeError(f"takes a whole number from {lo} to {hi}, not {text}")
        return value
    return parse


def finite(text: str) -> float:
    """A finite number (nan and inf are refused)."""
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a number") from None
    if not math.isfinite(value):
        raise argparse.ArgumentTypeError(f"'{text}' is not a finite number")
    return value


def positive(text: str) -> int:
    """A whole number, at least 1."""
    try:
        value = int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"'{text}' is not a whole number") from None
    if value < 1:
        raise argparse.ArgumentTypeError(f"must be at least 1, got {value}")
    return value


def positive_list(text: str) -> tuple[int, ...]:
    """"512,1024" -> (512, 1024): whole numbers, each at least 1."""
    values = tuple(positive(v) for v in text.split(",") if v)
    if not values:
        raise argparse.ArgumentTypeError(f"expected comma-separated whole numbers, got {text!r}")
    return values


def token_ids(text: str) -> list[int]:
    """"1,2,3" -> [1, 2, 3]: exact token ids."""
    try:
        return [int(v) for v in text.split(",")]
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected comma-separated token ids, got {text!r}") from None


def names(text: str) -> tuple[str, ...]:
    """"a,b" -> ("a", "b"); empty items dropped."""
    return tuple(v for v in text.split(",") if v)


def sizes(text: str) -> tuple[tuple[int, int], ...]:
    """"448x448,300x200" -> ((448, 448), (300, 200))."""
    out = []
    for item in text.split(","):
        w, sep, h = item.strip().partition("x")
        if not sep or not w.isdigit() or not h.isdigit() or int(w) < 1 or int(h) < 1:
            raise argparse.ArgumentTypeError(f"expected WIDTHxHEIGHT sizes, got {item!r}")
        out.append((int(w), int(h)))
    return tuple(out)


def socs(text: str) -> tuple[str, ...]:
    chosen = names(text)
    unknown = [s for s in chosen if s not in SOCS]
    if not chosen or unknown:
        raise argparse.ArgumentTypeError(f"unknown SoC {', '.join(unknown) or repr(text)} (known: {', '.join(SOCS)})")
    return chosen


# ---- flags -------------------------------------------------------------------------------------

def threads(p: argparse.ArgumentParser, what: str = "") -> None:
    p.add_argument("--threads", type=whole(0, MAX_THREADS), default=0,
                   help=what or "intra-op threads (0: every core; more are capped to the cores)")


def soc(p: argparse.ArgumentParser) -> None:
    p.add_argument("--soc", type=socs, default=("sm8750",), dest="socs",
                   help=f"qnn-htp: the SoCs to compile for, comma-separated ({', '.join(SOCS)}; default sm8750)")


def verbose(p: argparse.ArgumentParser) -> None:
    p.add_argument("--verbose", action="store_true",
                   help="also show third-party warnings and native logs (default: in OUT.export.log beside OUT)")


def export_target(p: argparse.ArgumentParser, precision_help: str, *, blocks: bool = True,
                  skip_validation: bool = True) -> None:
    """What the `export` commands take: checkpoint, output, format, target, precision, block size
    (`blocks`: a command whose CPU precisions quantize in blocks), SoCs, threads, --no-validate
    (`skip_validation`), verbosity (omni_edge.export.options.TargetOptions)."""
    p.add_argument("--checkpoint", type=Path, required=True,
                   help="a checkpoint directory (config.json, model.safetensors, tokenizer.json) or, for llm, a .gguf file")
    p.add_argument("--out", type=Path, required=True)
    p.add_argument("--format", choices=[*FORMATS, "both"], default="onnx",
                   help="ONNX Runtime graphs, an ExecuTorch program (XNNPACK), or both")
    p.add_argument("--target", choices=TARGETS, default="cpu",
                   help="qnn-htp: QNN context binaries per SoC, validated on the HTP backend")
    p.add_argument("--precision", default="", help=precision_help)
    if blocks:
        p.add_argument("--block-size", type=whole(1, 1 << 16), default=32,
                       help="cpu int8/int4: weights per quantization block along K (a power of two; default 32)")
    soc(p)
    threads(p)
    if skip_validation:
        p.add_argument("--no-validate", action="store_true", help="skip validation (the artifact will not qualify)")
    verbose(p)


def target_options(args: argparse.Namespace) -> dict[str, Any]:
    """TargetOptions' fields from the flags export_target declared."""
    given = dict(formats=formats_of(args.format), target=args.target, precision=args.precision, socs=args.socs,
                 threads=args.threads)
    if "block_size" in args:
        given["block_size"] = args.block_size
    if "no_validate" in args:
        given["validate"] = not args.no_validate
    return given


def sampling(p: argparse.ArgumentParser) -> None:
    """The sampling flags of run and speak; any one given replaces the plan's sampling."""
    p.add_argument("--temperature", type=finite, default=None, help=f"below {GREEDY_BELOW:g}: greedy")
    p.add_argument("--top-k", type=whole(0, 1 << 30), default=None)
    p.add_argument("--top-p", type=finite, default=None)
    p.add_argument("--min-p", type=finite, default=None)
    p.add_argument("--repetition-penalty", type=finite, default=None)
    p.add_argument("--seed", type=whole(0, (1 << 64) - 1), default=None)


def sampling_of(args: argparse.Namespace) -> dict[str, Any] | None:
    """The sampling flags given (None: the plan's sampling)."""
    fields = {"temperature": args.temperature, "top_k": args.top_k, "top_p": args.top_p, "min_p": args.min_p,
              "repetition_penalty": args.repetition_penalty, "seed": args.seed}
    chosen = {k: v for k, v in fields.items() if v is not None}
    return chosen or None


def session(p: argparse.ArgumentParser) -> None:
    """What opening a plan's session takes: threads, qualification, placement printing."""
    threads(p)
    p.add_argument("--allow-unqualified", action="store_true", help="load artifacts whose reports did not pass")
    p.add_argument("--info", action="store_true", help="print where each graph runs")


def device(p: argparse.ArgumentParser, *, required: bool) -> None:
    """The device a command runs on (required for the harness's commands; run and speak run
    in-process unless given one) and how to reach it."""
    p.add_argument("--device", required=required, default=None,
                   help="host, qemu-aarch64, or an ADB serial" + ("" if required else
                                                                  " (default: run in-process, not on a device)"))
    adb(p)
    p.add_argument("--workdir", default=None, help="deployment root on the device")


def adb(p: argparse.ArgumentParser) -> None:
    """The ADB server the devices are reached through."""
    p.add_argument("--adb-host", default="127.0.0.1")
    p.add_argument("--adb-port", type=whole(1, 65535), default=5037)


def runtime(p: argparse.ArgumentParser) -> None:
    """The runtime deployed to a device beside the plan."""
    p.add_argument("--runtime", type=Path, default=None,
                   help="a runtime built for the device: DIR/bin/omni-edge-run + DIR/lib, e.g. a bundle "
                        "(omni-edge bundle); default: this host's build")
