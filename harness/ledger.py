"""The admission ledger's Python mirror, for planning before anything runs.

Same formula and refusal rules as controller_cpp/runtime/admission.{h,cc} (tests compare the
two on real plans): a plan's budget per stage is

    weights       bytes of the graph/weight files its manifest lists
    state         float32 KV cache of the largest bucket plus the one it migrates from, per session
    loading_peak  the largest single file (held twice while a runtime deserializes it)
    workspace     activations and logits of one prefill chunk, plus a fixed arena per backend
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
_WEIGHT_EXTENSIONS = {".onnx", ".data", ".bin", ".pte", ".so"}


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


def _decoder_state(c: dict[str, Any]) -> int:
    per_slot = 2 * int(c["num_layers"]) * int(c["num_kv_heads"]) * int(c["head_dim"]) * 4
    kv = c.get("kv", {})
    slots = int(kv.get("window", 0))
    buckets = [int(b) for b in kv.get("buckets", [])]
    if kv.get("mode", "full") == "full" and buckets:
        slots = buckets[-1] + (buckets[-2] if len(buckets) > 1 else 0)  # a migration holds both
    return per_slot * slots


def _decoder_workspace(c: dict[str, Any]) -> int:
    return max(int(c.get("prefill_chunk", 1)), 1) * (int(c["vocab_size"]) + 8 * int(c["hidden_size"])) * 4


def _decoders(stage: dict[str, Any]) -> list[dict[str, Any]]:
    if "talker" in stage:
        return [stage["talker"]["decoder"], stage["talker"]["predictor"]]
    return [stage["llm"]] if "llm" in stage else []


def _stage_budget(stage_id: int, pool: str, files: list[int], decoders: list[dict[str, Any]],
                  n_backends: int, sessions: int, vocoder: dict[str, Any] | None = None) -> StageBudget:
    weights, loading_peak = sum(files), max(files, default=0)
    state = sum(_decoder_state(c) for c in decoders) * sessions
    workspace = sum(_decoder_workspace(c) for c in decoders)
    if vocoder is not None:  # the codes window in, its samples out
        workspace += sum(int(w) for w in vocoder["windows"]) * (int(vocoder["code_groups"]) * 8
                                                               + int(vocoder["samples_per_frame"]) * 4)
    workspace += RUNTIME_ARENA_BYTES * n_backends
    margin = int(MARGIN_FRACTION * (weights + state + loading_peak + workspace))
    return StageBudget(stage_id, pool, weights, state, loading_peak, workspace, margin)


def estimate_plan_budget(plan_path: Path, sessions: int = 1, wsl: bool = False) -> PlanBudget:
    """The budget of an exported plan, read from its manifests (nothing is loaded). Stages that
    share an artifact share its weights: they are counted once, on the first of them."""
    if sessions < 1:
        raise ValueError(f"sessions: at least 1, got {sessions}")
    plan = json.loads(plan_path.read_text())
    stages = []
    loaded: set[Path] = set()
    for stage in plan["stages"]:
        artifact = (plan_path.parent / stage["artifact"]).resolve()
        manifest = json.loads((artifact / "manifest.json").read_text())
        sizes = [] if artifact in loaded else [(artifact / name).stat().st_size for name in sorted(manifest["files"])
                                               if Path(name).suffix in _WEIGHT_EXTENSIONS]
        loaded.add(artifact)
        backends = {g["backend"] for g in stage.get("graphs", {}).values()}
        stages.append(_stage_budget(int(stage["stage_id"]), stage_pool(wsl), sizes, _decoders(stage),
                                    len(backends), sessions, stage.get("vocoder")))
    return PlanBudget(tuple(stages), sessions)


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

    def budget(self, pool: str = "device_ram", sessions: int = 1) -> PlanBudget:
        weights = int(self.parameters * self.bits_per_weight / 8) + self.extra_weights
        # Sharded into files of at most 2 GiB, as exporters do: the loading peak is one shard.
        files = [min(weights - i, 2 << 30) for i in range(0, weights, 2 << 30)]
        llm = {"num_layers": self.layers, "num_kv_heads": self.kv_heads, "head_dim": self.head_dim,
               "kv": {"mode": "full", "buckets": [self.context]}, "prefill_chunk": 128,
               "vocab_size": 151936, "hidden_size": self.kv_heads * self.head_dim * 4}
        return PlanBudget((_stage_budget(0, pool, files, [llm], 1, sessions),), sessions)


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
