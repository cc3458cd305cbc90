"""What `omni-edge verify PATH` checks: PATH may be whatever the tools wrote.

- a component directory (it holds manifest.json): that component;
- a plan file: every component its stages name (where the controller finds them);
- an export directory (what `export` wrote: components and plan*.json beside them): every
  component in it and every plan, each plan's components named;
- a device bundle (bundle.json): handled by the bundle verifier, not here.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path

from omni_edge.contracts.manifest import MANIFEST_NAME


class VerifyTargetError(ValueError):
    """PATH is none of the things verify takes, or a plan in it is unreadable."""


@dataclass
class PlanComponents:
    plan: Path
    components: list[Path]


@dataclass
class VerifyTargets:
    components: list[Path] = field(default_factory=list)  # each once, in a stable order
    plans: list[PlanComponents] = field(default_factory=list)


def plan_components(plan: Path) -> list[Path]:
    """The component directories a plan's stages name, in stage order, each once, then its voice
    activity detector's. As the controller reads them: relative to the plan (an omni plan names
    its thinker's and talker's components beside their own plans), each a directory holding a
    manifest, whose hashes are what make it safe to load."""
    try:
        data = json.loads(plan.read_text(encoding="utf-8"))
        names = [stage["artifact"] for stage in data["stages"]]
        if "voice_activity" in data:
            names.append(data["voice_activity"]["artifact"])
    except (OSError, UnicodeDecodeError, ValueError, KeyError, TypeError) as exc:
        raise VerifyTargetError(f"{plan}: not a readable plan ({type(exc).__name__}: {exc})") from None
    out: list[Path] = []
    for name in names:
        if not isinstance(name, str) or not name:
            raise VerifyTargetError(f"{plan}: a stage's artifact must be a non-empty path")
        component = (plan.parent / name).resolve()
        if not (component / MANIFEST_NAME).is_file():
            raise VerifyTargetError(f"{plan}: artifact {name!r} is not a component (no {MANIFEST_NAME} in {component})")
        if component not in out:
            out.append(component)
    return out


def _is_plan(path: Path) -> bool:
    return path.is_file() and path.name.startswith("plan") and path.suffix == ".json"


def resolve(path: Path) -> VerifyTargets:
    if (path / MANIFEST_NAME).is_file():
        return VerifyTargets(components=[path])
    if path.is_file():
        components = plan_components(path)
        return VerifyTargets(components=components, plans=[PlanComponents(path, components)])
    if not path.is_dir():
        raise VerifyTargetError(f"{path}: no such file or directory")
    plans = [PlanComponents(p, plan_components(p)) for p in sorted(path.iterdir()) if _is_plan(p)]
    components = [d.resolve() for d in sorted(path.iterdir()) if (d / MANIFEST_NAME).is_file()]
    for plan in plans:  # a plan may name a component in a subfolder: verify it too
        components += [c for c in plan.components if c not in components]
    if not components:
        raise VerifyTargetError(f"{path}: not a component (no {MANIFEST_NAME}), a plan, an export directory "
                                f"(components and plan*.json) or a bundle (bundle.json)")
    return VerifyTargets(components=components, plans=plans)
