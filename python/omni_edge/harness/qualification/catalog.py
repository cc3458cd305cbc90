"""The roadmap's device routes and model families, as data the qualification matrix plans with.

RAM and SoC data are the products' published specifications (the configuration named in
`hardware`). `usable_fraction` is the planning assumption for how much of the pool one
foreground application can hold: Android's low-memory killer leaves an app roughly half of
the phone's RAM; Windows and Linux keep a few GiB for the OS and the desktop; WSL 2's VM gets
half of the host's RAM by default. The ledger plans against `capacity`, never against raw RAM.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from omni_edge.harness.qualification.ledger import Footprint

GiB = 1 << 30


@dataclass(frozen=True)
class Route:
    key: str
    name: str
    hardware: str
    soc: str
    ram_bytes: int
    os: str
    engines: tuple[str, ...]        # where stages may be placed, in preference order
    pool: str                       # the pool the model's weights live in on this route
    usable_fraction: float
    vram_bytes: int = 0
    htp_arch: str | None = None
    notes: str = ""

    @property
    def capacity(self) -> dict[str, int]:
        if self.pool == "vram":
            return {"vram": int(self.vram_bytes * 0.9), "device_ram": int(self.ram_bytes * self.usable_fraction)}
        return {self.pool: int(self.ram_bytes * self.usable_fraction)}


ROUTES: tuple[Route, ...] = (
    Route("cpu-wsl", "CPU-only, WSL 2", "x86-64 laptop, 32 GB DDR5", "x86-64 (AVX2)", 32 * GiB,
          "Windows 11 + WSL 2 (Ubuntu)", ("cpu",), "wsl_quota", 0.5, notes="WSL 2 default memory limit: 50% of host RAM"),
    Route("cpu-windows", "CPU-only, native Windows", "x86-64 laptop, 32 GB DDR5", "x86-64 (AVX2)", 32 * GiB,
          "Windows 11", ("cpu",), "device_ram", 0.75),
    Route("cpu-nvidia-wsl", "CPU + NVIDIA, WSL 2", "x86-64 laptop, 32 GB + RTX 4070 Laptop 8 GB", "x86-64 + AD106",
          32 * GiB, "Windows 11 + WSL 2 (CUDA)", ("cuda", "cpu"), "vram", 0.5, vram_bytes=8 * GiB),
    Route("cpu-nvidia-windows", "CPU + NVIDIA, native Windows", "x86-64 laptop, 32 GB + RTX 4070 Laptop 8 GB",
          "x86-64 + AD106", 32 * GiB, "Windows 11", ("cuda", "cpu"), "vram", 0.75, vram_bytes=8 * GiB),
    Route("radeon-890m", "CPU + Radeon 890M", "Ryzen AI 9 HX 370, 32 GB LPDDR5X-7500 (UMA)", "Strix Point", 32 * GiB,
          "Windows 11", ("gpu", "cpu"), "device_ram", 0.75, notes="iGPU memory is carved from system RAM"),
    Route("amd-npu", "CPU + AMD NPU", "Ryzen AI 9 HX 370 (XDNA 2, 50 TOPS), 32 GB LPDDR5X", "Strix Point", 32 * GiB,
          "Windows 11", ("npu", "cpu"), "device_ram", 0.75),
    Route("intel-igpu-npu", "CPU + iGPU + NPU (NVIDIA present or not)",
          "Core Ultra 7 155H (Arc iGPU, NPU 3720), 32 GB LPDDR5X", "Meteor Lake", 32 * GiB, "Windows 11",
          ("npu", "gpu", "cpu"), "device_ram", 0.75, notes="a discrete NVIDIA GPU, when fitted, is not used on this route"),
    Route("x-elite", "Snapdragon X Elite", "X1E-80-100, 32 GB LPDDR5X-8448", "SC8380XP", 32 * GiB,
          "Windows 11 on Arm", ("npu", "gpu", "cpu"), "device_ram", 0.75, htp_arch="v73"),
    Route("galaxy-s25", "Galaxy S25", "Samsung Galaxy S25, 12 GB LPDDR5X", "SM8750 (Snapdragon 8 Elite)", 12 * GiB,
          "Android 15", ("npu", "gpu", "cpu"), "device_ram", 0.5, htp_arch="v79"),
    Route("galaxy-s24", "Galaxy S24", "Samsung Galaxy S24 (Snapdragon variant), 8 GB LPDDR5X",
          "SM8650 (Snapdragon 8 Gen 3)", 8 * GiB, "Android 14", ("npu", "gpu", "cpu"), "device_ram", 0.5,
          htp_arch="v75"),
    Route("sa8775p-adp", "SA8775P ADP", "Qualcomm SA8775P Automotive Development Platform, 32 GB LPDDR5",
          "SA8775P", 32 * GiB, "Linux (Yocto) / QNX", ("npu", "gpu", "cpu"), "device_ram", 0.8, htp_arch="v73"),
    Route("rb3-gen2", "RB3 Gen 2 (QCS6490)", "Qualcomm RB3 Gen 2 Core Kit, 6 GB LPDDR4x", "QCS6490", 6 * GiB,
          "Linux (Qualcomm Linux)", ("npu", "gpu", "cpu"), "device_ram", 0.8, htp_arch="v68"),
)


# MiniCPM-o 4.5 by its shapes (export/models/minicpmo45; README, its section): the Qwen3-8B thinker
# (36 layers, 8 KV heads of 128, vocabulary 151,748, untied head: 8.19 B), and the other stages
# at fp16: SigLIP (26 layers kept) 0.40 B, resampler 0.09 B, Whisper-medium's encoder 0.31 B,
# audio projector 0.02 B, talker 0.32 B (its 152k-row text table included), token2wav's flow
# 0.156 B and HiFT 0.021 B: 1.31 B.
MINICPMO45_THINKER, MINICPMO45_OTHERS = 8.19e9, 1.31e9
THINKER_BITS = {"fp16": 16.0, "int8": 8.5, "int4": 4.5}  # per weight, block scales included


def minicpmo45(thinker_bits: float, context: int = 8192) -> Footprint:
    """MiniCPM-o 4.5 with its thinker at `thinker_bits` per weight, the other stages at fp16, KV
    for `context` positions."""
    return Footprint("omni", MINICPMO45_THINKER, thinker_bits, 36, 8, 128, context, extra_weights=int(2 * MINICPMO45_OTHERS))


# InternVLA-A1 (3B) by its shapes (export/models/internvla_a1; README, its section), what action
# inference reads: Qwen3-VL-2B's decoder as the understanding expert (28 layers of 2048, 8 KV heads
# of 128, its 151,936-row table tied) 1.72 B, its vision tower 0.33 B (the deepstack mergers are
# not read), the generation and action experts (28 layers of 1024) 0.44 B each, the Cosmos CI8x8
# encoder 0.03 B and the history pooling 0.07 B: 3.03 B. Its context: 3 camera slots of 49 rows
# (+ start and end), 48 task slots, 2 frames x 16 rows per slot, then the state and a 50-step chunk.
INTERNVLA_A1_PARAMETERS = 3.03e9
INTERNVLA_A1_CONTEXT = 3 * (49 + 2) + 48 + 3 * 2 * 16 + 1 + 50
# Bits per weight of what the exports write: fp32 (CPU), fp16 (HTP) and the HTP's w8a16, where
# the decoders' 2.29 B weights are 8-bit and the embeddings, vision tower, Cosmos and pooling
# (0.74 B) stay 16-bit: (2.29 x 8 + 0.74 x 16) / 3.03 = 9.95.
POLICY_BITS = {"fp32": 32.0, "fp16": 16.0, "w8a16": 9.95}


def internvla_a1(bits: float) -> Footprint:
    """InternVLA-A1 with every weight at `bits`, its float32 context (keys and values of 28 layers)."""
    return Footprint("policy", INTERNVLA_A1_PARAMETERS, bits, 28, 8, 128, INTERNVLA_A1_CONTEXT)


# Qwen3.5-27B by its shapes (the hybrid of export/models/qwen3_5; README, its section): 64 layers
# of 5120, every fourth gated attention (24 query / 4 KV heads of 256), the others Gated DeltaNet
# (16 key / 48 value heads of 128, conv kernel 4), MLP 17408, vocabulary 248,320 with an untied
# head: 26.9 B in the text model, from these shapes; its vision tower (27 blocks of 1152) 0.46 B.
QWEN35_27B = {"hidden": 5120, "layers": 64, "attention_every": 4, "heads": 24, "kv_heads": 4, "head_dim": 256,
              "k_heads": 16, "v_heads": 48, "k_dim": 128, "v_dim": 128, "conv_kernel": 4, "intermediate": 17408,
              "vocab": 248320, "vision": 0.46e9}


def hybrid_parameters(s: dict[str, Any]) -> float:
    """The text model's weights from its shapes: embedding and head, MLPs, attention and Gated
    DeltaNet layers (norms and the per-head decay parameters are negligible)."""
    h, n_att = s["hidden"], s["layers"] // s["attention_every"]
    n_lin = s["layers"] - n_att
    q, kv = s["heads"] * s["head_dim"], s["kv_heads"] * s["head_dim"]
    attention = h * (2 * q + 2 * kv) + q * h
    key, value = s["k_heads"] * s["k_dim"], s["v_heads"] * s["v_dim"]
    linear = h * (2 * key + 2 * value + 2 * s["v_heads"]) + value * h + (2 * key + value) * s["conv_kernel"]
    return float(2 * s["vocab"] * h + s["layers"] * 3 * h * s["intermediate"] + n_att * attention + n_lin * linear)


def qwen35(bits: float, context: int = 4096, s: dict[str, Any] = QWEN35_27B) -> Footprint:
    """A Qwen3.5 hybrid at `bits` per weight (its vision tower at fp16): KV of its attention layers
    for `context` positions, and each linear layer's conv and recurrent state (float32, the plan's
    history of sets and the saved prompt state)."""
    n_att = s["layers"] // s["attention_every"]
    recurrent = {"layers": s["layers"] - n_att, "conv_state": [2 * s["k_heads"] * s["k_dim"] + s["v_heads"] * s["v_dim"],
                                                               s["conv_kernel"] - 1],
                 "recurrent_state": [s["v_heads"], s["k_dim"], s["v_dim"]], "history": 4}
    return Footprint("27b", hybrid_parameters(s), bits, n_att, s["kv_heads"], s["head_dim"], context,
                     extra_weights=int(2 * s["vision"]), recurrent=recurrent)


@dataclass(frozen=True)
class Family:
    key: str
    name: str
    reference: str
    footprint: Footprint
    stages: tuple[str, ...] = field(default=("thinker",))


FAMILIES: tuple[Family, ...] = (
    Family("spark", "Spark text LLM", "Qwen3-0.6B, 8-bit weights, 4K context",
           Footprint("spark", 0.6e9, 8.5, 28, 8, 128, 4096)),
    Family("qwen3-tts", "Qwen3-TTS", "talker 0.6B + code predictor + vocoder, 8-bit, 2K frames",
           Footprint("qwen3-tts", 0.9e9, 8.5, 28, 8, 128, 2048, extra_weights=220 << 20),
           ("talker", "code_predictor", "vocoder")),
    Family("omni", "MiniCPM-o 4.5", "Qwen3-8B thinker at 4-bit (4.5 bits/weight with scales) + SigLIP, Whisper "
           "encoder, talker and token2wav at fp16, 8K context", minicpmo45(THINKER_BITS["int4"]),
           ("vision", "audio", "thinker", "talker", "vocoder")),
    Family("policy", "InternVLA-A1", "3B VLA: Qwen3-VL-2B understanding, foresight and action experts of 1024, Cosmos "
           "CI8x8 encoder; w8a16 on the HTP (decoders 8-bit, the rest 16-bit)",
           internvla_a1(POLICY_BITS["w8a16"]), ("vision", "frame", "context", "action")),
    Family("pi0", "π0", "3.3B VLA: PaliGemma (SigLIP + Gemma 2B, one KV head of 256) + a 0.3B action expert, fp16, "
           "two cameras", Footprint("pi0", 3.3e9, 16.0, 18, 1, 256, 2 * 256 + 48 + 51), ("vision", "prefix", "action")),
    Family("27b", "27B-class", "Qwen3.5-27B hybrid (48 Gated DeltaNet + 16 gated attention layers), 4-bit weights "
           "(4.5 bits/weight with scales), vision tower at fp16, 4K context", qwen35(THINKER_BITS["int4"]),
           ("vision", "thinker")),
)


def route(key: str) -> Route:
    for r in ROUTES:
        if r.key == key:
            return r
    raise KeyError(f"unknown route {key!r} (known: {', '.join(r.key for r in ROUTES)})")


def family(key: str) -> Family:
    for f in FAMILIES:
        if f.key == key:
            return f
    raise KeyError(f"unknown family {key!r} (known: {', '.join(f.key for f in FAMILIES)})")
