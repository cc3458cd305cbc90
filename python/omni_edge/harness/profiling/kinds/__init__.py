"""The plan kinds of the profiling protocol (base.py: what each one owns), chosen from a plan by
`kind_of` (its final outputs and its encoder stages) or from a report by `kind_named`."""

from __future__ import annotations

import json
from pathlib import Path

from omni_edge.harness.profiling.kinds.base import TERMINAL_KINDS, PlanKind, Workload, is_first_output
from omni_edge.harness.profiling.kinds.multimodal import Multimodal, MultimodalOmni, plan_media
from omni_edge.harness.profiling.kinds.omni import Omni
from omni_edge.harness.profiling.kinds.policy import Policy
from omni_edge.harness.profiling.kinds.speech import Speech
from omni_edge.harness.profiling.kinds.text import Text

__all__ = ["KINDS", "TERMINAL_KINDS", "PlanKind", "Workload", "is_first_output", "kind_named", "kind_of"]

KINDS: dict[str, type[PlanKind]] = {k.name: k for k in (Text, Speech, Omni, Policy)}  # by report.json's "kind"


def kind_of(plan_path: Path) -> PlanKind:
    """The kind of a plan, from the final outputs its stages declare and its encoder stages."""
    try:
        stages = json.loads(plan_path.read_text())["stages"]
        finals = {s.get("final_output_type") for s in stages if s.get("final_output")}
    except (OSError, ValueError, KeyError, TypeError, AttributeError) as exc:
        raise ValueError(f"{plan_path}: not a readable plan ({exc})") from None
    if "audio" in finals:
        if "text" not in finals:
            return Speech(plan_path)
        return MultimodalOmni(plan_path) if plan_media(plan_path) else Omni(plan_path)
    if "action" in finals:
        return Policy(plan_path)
    return Multimodal(plan_path) if plan_media(plan_path) else Text(plan_path)


def kind_named(name: str | None) -> PlanKind:
    """The kind a report names (a report without one is a text plan's, as before kinds existed)."""
    if name is None:
        return Text()
    if name not in KINDS:
        raise ValueError(f"not a plan kind: {name!r} (one of {', '.join(KINDS)})")
    return KINDS[name]()
