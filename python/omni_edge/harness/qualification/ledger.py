"""The admission ledger for planning before anything runs: the native budget of a plan (through
the binding: the formula exists once, in controller_cpp/runtime/admission.cc and each family's
memory rule), and a ledger with the native refusal rules. A plan's budget per stage is

    weights       bytes of the graph/weight files its manifest lists
    state         resident state per session (a decoder: float32 KV cache of the largest bucket
                  plus the one it migrates from)
    loading_peak  the largest single file (held twice while a runtime deserializes it)
    workspace     working memory (a decoder: one prefill chunk's activations and logits), plus a
                  fixed arena per backend
    margin        10% of the above

and every stage is reserved against the physical pool its device draws from, all or nothing.
The qualification matrix uses `Footprint` to size model families without an artifact.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

POOLS = ("device_ram", "vram", "wsl_quota")
RUNTIME_ARENA_BYTES = 32 << 20
MARGIN_FRACTION = 0.10


class AdmissionError(RuntimeError):
    """A reservation that does not fit; the message carries the numbers."""


def mib(n: int) -> str:
    return f"{n / (1 << 20):.1f} MiB"


def stage_pool(wsl: bool = False) -> str:
    """Plans place graphs on cpu, gpu or npu, which share one DRAM (under WSL: the VM's quota);
    "vram" belongs to routes with a discrete GPU, which plans cannot target yet."""
    return "wsl_quota" if wsl else "device_ram"


def on_wsl() -> bool:
    """As the native DetectPools decides: the kernel says it was built by Microsoft."""
    try:
        return "microsoft" in Path("/proc/version").read_text().lower()
    except OSError:
        return False


def check_memory_budget(plan: dict[str, Any], budget: PlanBudget, plan_path: Path) -> None:
    """The plan's own cap (memory_budget_mb) over all pools, as the native session applies it."""
    cap = plan.get("memory_budget_mb")
    if cap is None:
        return
    total = sum(budget.per_pool().values())
    if total > int(cap) << 20:
        raise AdmissionError(f"{plan_path} needs {total >> 20} MiB but its memory_budget_mb is {cap}; nothing was loaded")


@dataclass(frozen=True)
class StageBudget:
    stage_id: int
    pool: str
    weights: int = 0
    state: int = 0
    loading_peak: int = 0
    workspace: int = 0
    margin: int = 0

    @property
    def total(self) -> int:
        return self.weights + self.state + self.loading_peak + self.workspace + self.margin

    def to_dict(self) -> dict[str, Any]:
        return {"stage_id": self.stage_id, "pool": self.pool, "weights": self.weights, "state": self.state,
                "loading_peak": self.loading_peak, "workspace": self.workspace, "margin": self.margin,
                "total": self.total}


@dataclass(frozen=True)
class PlanBudget:
    stages: tuple[StageBudget, ...]
    sessions: int = 1

    def per_pool(self) -> dict[str, int]:
        out: dict[str, int] = {}
        for s in self.stages:
            out[s.pool] = out.get(s.pool, 0) + s.total
        return out

    def to_dict(self) -> dict[str, Any]:
        return {"sessions": self.sessions, "stages": [s.to_dict() for s in self.stages], "pools": self.per_pool()}


def estimate_plan_budget(plan_path: Path, sessions: int = 1, wsl: bool = False) -> PlanBudget:
    """The budget of an exported plan as the native runtime computes it from its manifests
    (nothing is loaded): the formula exists once, in controller_cpp/runtime/admission.cc and the
    families' memory rules."""
    from omni_edge import _native
    from omni_edge.contracts import ContractError

    if sessions < 1:
        raise ValueError(f"sessions: at least 1, got {sessions}")
    try:
        raw = json.loads(_native.plan_budget(str(plan_path), sessions, wsl))
    except ContractError as exc:
        raise ValueError(f"{plan_path}: {exc.message}") from exc
    return PlanBudget(tuple(StageBudget(**{k: v for k, v in st.items() if k != "total"}) for st in raw["stages"]),
                      int(raw["sessions"]))


@dataclass(frozen=True)
class Footprint:
    """A model family at a precision, sized from its architecture (no artifact needed)."""

    name: str
    parameters: float            # count
    bits_per_weight: float       # e.g. 4.5 for 4-bit blocks with scales
    layers: int
    kv_heads: int
    head_dim: int
    context: int
    extra_weights: int = 0       # other stages (vision tower, vocoder, ...)
    # A hybrid's linear-attention layers (`layers` then counts the attention layers only): the
    # decoder plan's `recurrent` section, sized by the same native rule as the KV.
    recurrent: dict[str, Any] | None = None

    def budget(self, pool: str = "device_ram", sessions: int = 1) -> PlanBudget:
        """The admission rule of an exported plan (weights, state, loading peak, workspace plus the
        runtime arena, 10% margin) on numbers from the architecture; the decoder's state and
        workspace come from the native rule."""
        from omni_edge import _native

        weights = int(self.parameters * self.bits_per_weight / 8) + self.extra_weights
        # Sharded into files of at most 2 GiB, as exporters do: the loading peak is one shard.
        loading_peak = min(weights, 2 << 30)
        decoder = {"num_layers": self.layers, "num_kv_heads": self.kv_heads, "head_dim": self.head_dim,
                   "kv": {"mode": "full", "buckets": [self.context]}, "prefill_chunk": 128, "mask_value": -100.0,
                   "vocab_size": 151936, "hidden_size": self.kv_heads * self.head_dim * 4}
        if self.recurrent:
            decoder["recurrent"] = self.recurrent
        memory = json.loads(_native.decoder_memory(json.dumps(decoder)))
        state, workspace = int(memory["state"]) * sessions, int(memory["workspace"]) + RUNTIME_ARENA_BYTES
        margin = int(MARGIN_FRACTION * (weights + state + loading_peak + workspace))
        return PlanBudget((StageBudget(0, pool, weights, state, loading_peak, workspace, margin),), sessions)


@dataclass
class Ledger:
    """All-or-nothing reservations against named pools; quarantine for unconfirmed drains."""

    capacity: dict[str, int]
    _entries: dict[int, tuple[str, dict[str, int], bool]] = field(default_factory=dict)
    _next: int = 1

    def __post_init__(self) -> None:
        for name, value in self.capacity.items():
            if name not in POOLS:
                raise ValueError(f"pools.{name}: unknown pool ({', '.join(POOLS)})")
            if not isinstance(value, int) or value < 0:
                raise ValueError(f"pools.{name}: expected a non-negative integer")

    def _used(self, pool: str) -> int:
        return sum(b.get(pool, 0) for _, b, _ in self._entries.values())

    def free(self, pool: str) -> int:
        return self.capacity[pool] - self._used(pool) if pool in self.capacity else 0

    def reserve(self, owner: str, demand: dict[str, int]) -> int:
        for pool, n in demand.items():
            if n < 0:
                raise AdmissionError(f"{owner}: negative demand on {pool}")
            if pool not in self.capacity:
                raise AdmissionError(f"{owner} needs {mib(n)} of {pool}, which this device does not have")
            used = self._used(pool)
            if used + n > self.capacity[pool]:
                holders = ", ".join(f"{o} {mib(b[pool])}" + (" (quarantined)" if q else "")
                                    for o, b, q in self._entries.values() if pool in b)
                raise AdmissionError(
                    f"{owner} needs {mib(n)} of {pool} but only {mib(self.capacity[pool] - used)} of "
                    f"{mib(self.capacity[pool])} is free" + (f"; held by {holders}" if holders else "")
                    + "; nothing was loaded")
        rid = self._next
        self._next += 1
        self._entries[rid] = (owner, dict(demand), False)
        return rid

    def release(self, reservation: int, drained: bool = True) -> None:
        entry = self._entries.get(reservation)
        if entry is None or entry[2]:
            raise ValueError(f"reservation {reservation} is not held")
        if drained:
            del self._entries[reservation]
        else:
            self._entries[reservation] = (entry[0], entry[1], True)

    def forgive(self, reservation: int) -> None:
        entry = self._entries.get(reservation)
        if entry is None or not entry[2]:
            raise ValueError(f"reservation {reservation} is not quarantined")
        del self._entries[reservation]
