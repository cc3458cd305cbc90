"""The qualification matrix: every device route × model family, with a status derived from
stored qualification records and the admission ledger, never typed in by hand.

A cell moves through the roadmap's progression, each step on evidence:
  artifact-ready  an artifact of the family was exported for the route and its manifest verified
  correct         its reference checks (numerical and task reports) passed on the execution the
                  record names (the HTP emulator, the host, qemu-user, or the device), with a
                  checkpoint of the family's real size: a scaled-down local checkpoint shows the
                  artifact and the pipeline work, not that the family is correct, so such a cell
                  stays artifact-ready (its label says "tiny checkpoint" and the execution)
  executed        it ran on the route's own device (the profile's SoC and HTP match)
  profiled        a profile of that run exists
  qualified       functional qualification (correct on the device) and performance qualification
                  (profiled with n >= 20 measured requests), two separate fields of the cell
Or, before any of that:
  capacity-rejected  the ledger cannot reserve the family's budget in the route's pool (numbers given)
  blocked            every record failed: the failing layer, its reason, the evidence, the next experiment
  not attempted      no record

A record is a JSON file (schema omni-edge.qualification/1) made by `omni-edge matrix record`
from real evidence: an artifact's re-hashed manifest and validation reports, a profile's
report.json, or a failure log. Evidence files are copied next to the records and hashed.
"""

from __future__ import annotations

import html
import json
import secrets
import shutil
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from omni_edge.contracts.manifest import sha256_file
from omni_edge.files import write_text_atomic
from omni_edge.harness.qualification.catalog import FAMILIES, ROUTES, Family, Route, family, route
from omni_edge.harness.qualification.ledger import AdmissionError, Ledger, PlanBudget
from omni_edge.source_tree import source_tree

SCHEMA = "omni-edge.qualification/1"
# The project's own records, kept in the checkout (a plain install reads ./artifacts/qualification).
DEFAULT_STORE = (source_tree() or Path()) / "artifacts" / "qualification"
PROGRESSION = ("artifact-ready", "correct", "executed", "profiled", "qualified")
STATUSES = (*reversed(PROGRESSION), "capacity-rejected", "blocked", "not attempted")
FULL_SIZE = 0.25  # an artifact with less than this share of the family's weight bytes is a scaled-down checkpoint
NEXT_EXPERIMENT = {
    "quality": "compare the per-graph reports (reports/numerical.json) to find the graph that loses accuracy; "
               "re-export at a wider precision (w8a16 -> a16w16 or fp16) to confirm it is quantization",
    "admission": "a smaller precision or context bucket (omni-edge budget --plan shows what each costs)",
}
_NEXT_DEFAULT = "rerun the record's command with the log at full verbosity on the same device and runtime, " \
                "then on the HTP emulator to split device/runtime faults from the artifact's"
EXECUTIONS = ("device", "htp-emulator", "host", "qemu-user")


class RecordError(ValueError):
    pass


@dataclass(frozen=True)
class Cell:
    route: Route
    family: Family
    status: str
    detail: str
    records: tuple[str, ...]
    budget: dict[str, Any]
    functional: bool = False     # correct on the route's device with a full-size checkpoint
    performance: bool = False    # profiled on the device with n >= 20
    checkpoint: dict[str, Any] | None = None
    failure: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return {"route": self.route.key, "family": self.family.key, "status": self.status, "detail": self.detail,
                "qualification": {"functional": self.functional, "performance": self.performance},
                "checkpoint": self.checkpoint, "failure": self.failure,
                "records": list(self.records), "budget": self.budget}


def load_records(store: Path) -> list[dict[str, Any]]:
    """Every record of the store; a malformed one is an error naming the file (nothing is skipped silently)."""
    records = []
    for path in sorted((store / "records").glob("*.json")):
        try:
            record = json.loads(path.read_text())
        except ValueError as exc:
            raise RecordError(f"{path}: not JSON ({exc})") from exc
        if not isinstance(record, dict) or record.get("schema") != SCHEMA:
            raise RecordError(f"{path}: not a {SCHEMA} record")
        for key in ("route", "family", "execution", "outcome", "quality", "evidence"):
            if key not in record:
                raise RecordError(f"{path}: missing {key!r}")
        route(record["route"])
        family(record["family"])
        evidence = record["evidence"]
        if not isinstance(evidence, list) or not all(
                isinstance(ev, dict) and isinstance(ev.get("path"), str) and isinstance(ev.get("sha256"), str)
                for ev in evidence):
            raise RecordError(f"{path}: evidence must be a list of {{path, sha256}}")
        if not all(isinstance(record[k], dict) for k in ("outcome", "quality")):
            raise RecordError(f"{path}: outcome and quality must be objects")
        for ev in evidence:
            file = store / ev["path"]
            if not file.is_file() or sha256_file(file) != ev["sha256"]:
                raise RecordError(f"{path}: evidence {ev['path']} is missing or changed since it was recorded")
        record["_id"] = path.stem
        records.append(record)
    return records


def admission(r: Route, f: Family) -> tuple[bool, str, dict[str, Any]]:
    budget = f.footprint.budget(pool=r.pool)
    ledger = Ledger(r.capacity)
    try:
        ledger.reserve(f"{f.name}", budget.per_pool())
    except AdmissionError as exc:
        return False, str(exc), budget.to_dict()
    return True, "", budget.to_dict()


def route_admissions(budget: PlanBudget, owner: str) -> list[dict[str, Any]]:
    """Each route of the matrix: does its ledger admit `budget` (every stage moved to the route's
    pool), with the numbers and, where not, the ledger's refusal."""
    out = []
    need = sum(budget.per_pool().values())
    for r in ROUTES:
        entry: dict[str, Any] = {"route": r.key, "pool": r.pool, "need_mib": need / 2**20,
                                 "capacity_mib": r.capacity.get(r.pool, 0) / 2**20, "admitted": True, "reason": ""}
        try:
            Ledger(r.capacity).reserve(owner, {r.pool: need})
        except AdmissionError as exc:
            entry.update(admitted=False, reason=str(exc))
        out.append(entry)
    return out


def admission_by_precision(footprints: dict[str, Any]) -> dict[str, dict[str, tuple[bool, float, float]]]:
    """For each route and precision (name -> Footprint): (admitted, MiB needed, MiB of the pool)."""
    out: dict[str, dict[str, tuple[bool, float, float]]] = {}
    for r in ROUTES:
        out[r.key] = {}
        for name, footprint in footprints.items():
            budget = footprint.budget(pool=r.pool).per_pool()
            need, have = budget.get(r.pool, 0), r.capacity.get(r.pool, 0)
            try:
                Ledger(r.capacity).reserve(name, budget)
                fits = True
            except AdmissionError:
                fits = False
            out[r.key][name] = (fits, need / 2**20, have / 2**20)
    return out


def _performance_n(record: dict[str, Any]) -> int:
    perf = record.get("performance") or {}
    return min((int(g.get("requests", 0)) for g in perf.get("groups", {}).values()), default=0)


def checkpoint_scale(f: Family, record: dict[str, Any]) -> dict[str, Any]:
    """The checkpoint behind a record and whether it is the family's size: from the artifact's
    bytes against the family's weights (records made before bytes were kept: by its name)."""
    art = record.get("artifact") or {}
    family_bytes = f.footprint.parameters * f.footprint.bits_per_weight / 8
    size = art.get("bytes")
    if isinstance(size, int):
        full, how = size >= FULL_SIZE * family_bytes, f"{size / 2**20:.1f} MiB of files vs the family's " \
                                                       f"{family_bytes / 2**30:.2f} GiB of weights"
    else:
        name = str(art.get("checkpoint_id", ""))
        full, how = not any(w in name for w in ("tiny", "small", "bench")), "judged by its name (no size recorded)"
    return {"id": art.get("checkpoint_id"), "revision": art.get("checkpoint_revision"), "full_size": full, "why": how}


_WHERE = {"htp-emulator": "emulated numerics: QNN HTP emulator", "host": "on the host", "qemu-user": "under qemu-user",
          "device": "on the device"}


def _stage(f: Family, x: dict[str, Any]) -> tuple[int, str, dict[str, Any]]:
    """How far one record that ran takes the cell: (index in PROGRESSION, label, checkpoint)."""
    ckpt = checkpoint_scale(f, x)
    correct = bool(x["quality"].get("qualified")) and ckpt["full_size"]
    tiny = "" if ckpt["full_size"] else f", tiny checkpoint {ckpt['id']}"
    where = _WHERE.get(x["execution"], x["execution"])
    if x["execution"] != "device":
        return (1, f"correct ({where})", ckpt) if correct else (0, f"artifact-ready ({where}){tiny}", ckpt)
    n = _performance_n(x)
    serial = (x.get("device") or {}).get("serial", "the device")
    if correct and n >= 20:
        return 4, f"qualified on {serial}, n={n}", ckpt
    stage = 3 if x.get("performance") else 2
    return stage, f"{PROGRESSION[stage]} on {serial}" + (f", n={n}" if x.get("performance") else "") + tiny, ckpt


def cell_status(r: Route, f: Family, records: list[dict[str, Any]]) -> Cell:
    fits, why, budget = admission(r, f)
    mine = [x for x in records if x["route"] == r.key and x["family"] == f.key]
    ids = tuple(x["_id"] for x in mine)
    if not fits:
        return Cell(r, f, "capacity-rejected", why, ids, budget,
                    failure={"layer": "admission", "reason": why, "evidence": [], "next": NEXT_EXPERIMENT["admission"]})
    ran = [x for x in mine if x["outcome"].get("ran") and x["quality"].get("qualified")]
    if ran:
        best = max(((*_stage(f, x), x) for x in ran), key=lambda t: t[0])
        stage, label, ckpt, x = best
        on_device = [y for y in ran if y["execution"] == "device" and checkpoint_scale(f, y)["full_size"]]
        return Cell(r, f, PROGRESSION[stage], f"{x['artifact'].get('component', '?')}: {label}", ids, budget,
                    functional=bool(on_device),
                    performance=any(_performance_n(y) >= 20 for y in on_device), checkpoint=ckpt)
    if mine:  # every record failed: to run, or its quality reports
        x = mine[0]
        o = x["outcome"]
        evidence = [ev["path"] for ev in x["evidence"]]
        if o.get("ran"):
            reason = f"{x['artifact'].get('component', '?')} ran but its validation reports did not pass"
            failure = {"layer": "quality", "reason": reason, "evidence": evidence, "next": NEXT_EXPERIMENT["quality"]}
            return Cell(r, f, "blocked", f"quality: {reason}", ids, budget, failure=failure,
                        checkpoint=checkpoint_scale(f, x))
        layer, reason = str(o.get("layer", "?")), str(o.get("reason", "?"))
        failure = {"layer": layer, "reason": reason, "evidence": evidence,
                   "next": str(o.get("next") or NEXT_EXPERIMENT.get(layer, _NEXT_DEFAULT))}
        return Cell(r, f, "blocked", f"{layer}: {reason}", ids, budget, failure=failure)
    return Cell(r, f, "not attempted", "", ids, budget)


def matrix(store: Path = DEFAULT_STORE) -> list[Cell]:
    records = load_records(store)
    return [cell_status(r, f, records) for r in ROUTES for f in FAMILIES]


# ---- making records -------------------------------------------------------------------------

def _copy_evidence(store: Path, record_id: str, files: list[Path], names: list[str] | None = None) -> list[dict[str, str]]:
    """Copies of the evidence beside the records, hashed; `names` (default: the files' names) say
    where under the record's evidence directory each goes."""
    out = []
    for f, name in zip(files, names or [f.name for f in files], strict=True):
        target = store / "evidence" / record_id / name
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copy2(f, target)
        out.append({"path": target.relative_to(store).as_posix(), "sha256": sha256_file(target)})
    return out


@dataclass(frozen=True)
class _Ran:
    """A component that ran, its manifest re-hashed: the record's artifact fields, its QNN facts,
    its validation, and its evidence files."""

    summary: dict[str, Any]
    qnn: dict[str, Any]
    verified: dict[str, Any]
    evidence: list[Path]


def _verified_component(component: Path, r: Route) -> _Ran:
    from omni_edge._native import read_manifest

    verified = json.loads(read_manifest(str(component)))
    manifest = verified["manifest"]
    meta = manifest.get("metadata", {})
    qnn = meta.get("qnn", {})
    if r.htp_arch and qnn and qnn.get("htp_arch") != r.htp_arch:
        raise RecordError(f"{component} targets HTP {qnn.get('htp_arch')}, the route {r.key} is HTP {r.htp_arch}")
    evidence = [component / "manifest.json", component / "reports" / "numerical.json", component / "reports" / "task.json"]
    missing = [str(p) for p in evidence if not p.is_file()]
    if missing:
        raise RecordError(f"{component}: no {', '.join(missing)}: a record needs the artifact's validation reports")
    summary = {"component": manifest["component"], "manifest_sha256": sha256_file(component / "manifest.json"),
               "bytes": sum((component / name).stat().st_size for name in manifest["files"]),
               **{k: meta.get("artifact", {}).get(k)
                  for k in ("checkpoint_id", "checkpoint_revision", "precision", "target_abi", "runtime")}}
    return _Ran(summary, qnn, verified, evidence)


def _write_record(store: Path, r: Route, f: Family, execution: str, command: str, profile_report: Path | None,
                  artifact: dict[str, Any], quality: dict[str, Any], device: dict[str, Any], evidence: list[Path],
                  names: list[str] | None = None) -> Path:
    """The record of something that ran, its evidence (and the profile's) copied and hashed."""
    profile = json.loads(profile_report.read_text()) if profile_report else None
    if execution == "device":
        _check_device_identity(r, profile)
    if profile_report:
        evidence = [*evidence, profile_report]
        names = [*names, profile_report.name] if names is not None else None
    record_id = f"{r.key}--{f.key}--{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
    record = {
        "schema": SCHEMA, "route": r.key, "family": f.key, "execution": execution,
        "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
        "device": profile["device"] if profile else device,
        "artifact": artifact,
        "command": command,
        "placement": profile.get("placement") if profile else None,
        "quality": quality,
        "memory": ({"ledger": profile["ledger"], "memory": profile["memory"]} if profile else None),
        "performance": ({"startup": profile["startup"], "groups": profile["groups"]} if profile else None),
        "outcome": {"ran": True},
        "evidence": _copy_evidence(store, record_id, evidence, names),
    }
    path = store / "records" / f"{record_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


def _checked(route_key: str, family_key: str, execution: str) -> tuple[Route, Family]:
    r, f = route(route_key), family(family_key)
    if execution not in EXECUTIONS:
        raise RecordError(f"execution must be one of {', '.join(EXECUTIONS)}")
    return r, f


def record_from_artifact(store: Path, route_key: str, family_key: str, component: Path, execution: str,
                         command: str, profile_report: Path | None = None) -> Path:
    """A record from an artifact that ran: its manifest is re-hashed (native reader) first."""
    r, f = _checked(route_key, family_key, execution)
    ran = _verified_component(component, r)
    if execution == "htp-emulator" and not ran.qnn:
        raise RecordError(f"{component} is not a QNN artifact: it cannot have run on the HTP emulator")
    v = ran.verified
    return _write_record(store, r, f, execution, command, profile_report, ran.summary,
                         {"qualified": bool(v["qualified"]), "numerical": v["numerical"], "task": v["task"]},
                         {"serial": execution, "htp_arch": ran.qnn.get("htp_arch"), "soc": ran.qnn.get("soc")}, ran.evidence)


def record_from_plan(store: Path, route_key: str, family_key: str, plan: Path, execution: str, command: str,
                     profile_report: Path | None = None) -> Path:
    """A record from a whole plan that ran (a multi-stage family: every stage's component counts):
    each component's manifest is re-hashed; the record is qualified only if every one is."""
    r, f = _checked(route_key, family_key, execution)
    stages = json.loads(plan.read_text())["stages"]
    ran = [_verified_component(c, r) for c in dict.fromkeys((plan.parent / s["artifact"]).resolve() for s in stages)]
    if execution == "htp-emulator" and not any(x.qnn for x in ran):
        raise RecordError(f"{plan}: no stage is a QNN artifact: it cannot have run on the HTP emulator")
    summaries = [x.summary for x in ran]
    artifact = {"component": f"{plan.name} ({' + '.join(c['component'] for c in summaries)})",
                "bytes": sum(c["bytes"] for c in summaries), "components": summaries,
                **{k: summaries[0][k] for k in ("checkpoint_id", "checkpoint_revision", "target_abi")}}
    quality = {"qualified": all(bool(x.verified["qualified"]) for x in ran),
               "numerical": {x.summary["component"]: x.verified["numerical"] for x in ran},
               "task": {x.summary["component"]: x.verified["task"] for x in ran}}
    evidence = [plan, *[e for x in ran for e in x.evidence]]
    names = [plan.name, *[f"{x.summary['component']}/{e.name}" for x in ran for e in x.evidence]]
    return _write_record(store, r, f, execution, command, profile_report, artifact, quality, {"serial": execution},
                         evidence, names)


def _check_device_identity(r: Route, profile: dict[str, Any] | None) -> None:
    """A device record counts toward `qualified`: the profile must come from the route's own hardware."""
    if profile is None:
        raise RecordError("an execution=device record needs --profile-report from a run on that device")
    device = profile.get("device") or {}
    soc = str(device.get("soc") or "")
    if not soc or soc.lower() not in r.soc.lower():
        raise RecordError(f"the profile ran on {device.get('serial', '?')} (SoC {soc or 'unknown'}), "
                          f"not on the route's {r.soc}")
    if r.htp_arch and device.get("htp_arch") != r.htp_arch:
        raise RecordError(f"the profile's device has HTP {device.get('htp_arch')}, the route {r.key} is {r.htp_arch}")


def record_blocked(store: Path, route_key: str, family_key: str, layer: str, reason: str, log: Path,
                   command: str) -> Path:
    """A record of a failure: the log that shows it is the evidence (it must exist)."""
    r, f = route(route_key), family(family_key)
    if not log.is_file():
        raise RecordError(f"{log}: a blocked record needs the failure log as evidence")
    record_id = f"{r.key}--{f.key}--blocked-{time.strftime('%Y%m%dT%H%M%S', time.gmtime())}-{secrets.token_hex(3)}"
    record = {"schema": SCHEMA, "route": r.key, "family": f.key, "execution": "host",
              "recorded": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()), "device": {}, "artifact": {},
              "command": command, "placement": None, "quality": {"qualified": False}, "memory": None,
              "performance": None, "outcome": {"ran": False, "layer": layer, "reason": reason},
              "evidence": _copy_evidence(store, record_id, [log])}
    path = store / "records" / f"{record_id}.json"
    path.parent.mkdir(parents=True, exist_ok=True)
    write_text_atomic(path, json.dumps(record, indent=2) + "\n")
    return path


# ---- rendering ------------------------------------------------------------------------------

_MARK = {"qualified": "QUALIFIED", "profiled": "profiled", "executed": "executed", "correct": "correct",
         "artifact-ready": "artifact", "capacity-rejected": "capacity", "blocked": "BLOCKED", "not attempted": "·"}
_COLOR = {"qualified": "#2e7d32", "profiled": "#66bb6a", "executed": "#9ccc65", "correct": "#c5e1a5",
          "artifact-ready": "#e6ee9c", "capacity-rejected": "#ef9a9a", "blocked": "#ffb74d", "not attempted": "#eeeeee"}


def render_text(cells: list[Cell]) -> str:
    width = 24
    head = "route".ljust(width) + "".join(f.key.ljust(13) for f in FAMILIES)
    lines = [head, "-" * len(head)]
    for r in ROUTES:
        row = [c for c in cells if c.route.key == r.key]
        lines.append(r.key.ljust(width) + "".join(_MARK[c.status].ljust(13) for c in row))
    counts = {s: sum(c.status == s for c in cells) for s in STATUSES}
    lines += ["", f"{len(cells)} cells: " + ", ".join(f"{n} {s}" for s, n in counts.items()), ""]
    for c in cells:
        if c.status != "not attempted":
            lines.append(f"{c.route.key} × {c.family.key}: {c.status} — {c.detail}")
    return "\n".join(lines) + "\n"


def _evidence_html(c: Cell) -> str:
    """What a person checks before trusting the cell: qualification fields, checkpoint, failure, records."""
    parts = [f"functional: {'yes' if c.functional else 'no'} · performance: {'yes' if c.performance else 'no'}"]
    if c.checkpoint:
        scale = "full size" if c.checkpoint["full_size"] else "scaled-down"
        parts.append(f"checkpoint {c.checkpoint['id']} ({c.checkpoint.get('revision')}), {scale}: {c.checkpoint['why']}")
    if c.failure:
        parts.append(f"failed at {c.failure['layer']}: {c.failure['reason']}; evidence: "
                     f"{', '.join(c.failure['evidence']) or 'the ledger'}; next: {c.failure['next']}")
    if c.records:
        parts.append("records: " + ", ".join(c.records))
    return "".join(f"<div class='e'>{html.escape(p)}</div>" for p in parts)


def render_html(cells: list[Cell]) -> str:
    rows = []
    for r in ROUTES:
        tds = "".join(
            f'<td style="background:{_COLOR[c.status]}" title="{html.escape(c.detail)}">{html.escape(c.status)}'
            f'<div class="d">{html.escape(c.detail[:160])}</div>'
            f'{_evidence_html(c) if c.status != "not attempted" else ""}</td>'
            for c in cells if c.route.key == r.key)
        rows.append(f"<tr><th>{html.escape(r.name)}<div class='d'>{html.escape(r.hardware)} · "
                    f"{html.escape(r.soc)}</div></th>{tds}</tr>")
    head = "".join(f"<th>{html.escape(f.name)}<div class='d'>{html.escape(f.reference)}</div></th>" for f in FAMILIES)
    return ("<!doctype html><meta charset=utf-8><title>omni-edge qualification matrix</title>"
            "<style>body{font:13px sans-serif}td,th{border:1px solid #ccc;padding:4px;vertical-align:top;"
            "max-width:220px}.d{font-size:10px;color:#333}.e{font-size:9px;color:#555;margin-top:2px}</style>"
            f"<table><tr><th>route</th>{head}</tr>{''.join(rows)}</table>")
