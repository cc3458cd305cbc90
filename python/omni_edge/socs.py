"""The Snapdragon SoCs this project builds for: their names, HTP architectures and QNN SoC ids.

One table for the exporters (a context binary per SoC) and the harness (a device's facts)."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Soc:
    name: str
    htp_arch: int
    soc_model: int  # QNN's SoC id


# htp_arch and QNN soc ids as QNN documents them (ExecuTorch's Qualcomm backend uses the same).
SOCS: dict[str, Soc] = {
    "sm8750": Soc("Snapdragon 8 Elite (SM8750)", 79, 69),
    "sm8650": Soc("Snapdragon 8 Gen 3 (SM8650)", 75, 57),
    "x-elite": Soc("Snapdragon X Elite (SC8380XP)", 73, 60),
    "sa8775p": Soc("SA8775P (SA8255 family)", 73, 52),
    "qcs6490": Soc("QCS6490 / RB3 Gen 2", 68, 93),
}
