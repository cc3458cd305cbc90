"""Artifact manifest v2 and its validation reports (CONTRACT.md, "Artifact manifest v2").

Reading a manifest from disk re-hashes every file and re-reads both reports; an artifact is
*qualified* only when both reports were verified and passed. Mirrors controller_cpp/contract/manifest.h.
"""

from __future__ import annotations

import hashlib
import json
import operator
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from omni_edge.contracts.errors import ContractError
from omni_edge.contracts.fields import MAX_DEPTH, FieldReader, check_text, nesting_within

MANIFEST_NAME = "manifest.json"
MANIFEST_SCHEMA_VERSION = 2
REPORT_SCHEMA_VERSION = 1
REPORT_KINDS = ("numerical", "task")
MAX_CHECKS = 1000
COMPARISONS: dict[str, Callable[[float, float], bool]] = {
    "<=": operator.le, ">=": operator.ge, "<": operator.lt, ">": operator.gt, "==": operator.eq,
}
ARTIFACT_STRING_FIELDS = (
    "checkpoint_id", "checkpoint_revision", "precision", "runtime", "runtime_version", "target_abi",
    "adapter_version", "exporter_version", "compiler_version", "shape_bucket",
)
_SHA256_HEX = re.compile(r"^[0-9a-f]{64}$")


def check_relative_name(name: str, where: str) -> None:
    """A hashed file name: a relative POSIX path inside the artifact directory."""
    parts = name.split("/")
    if not name or name.startswith("/") or "\\" in name or "\0" in name or any(p in ("", ".", "..") for p in parts):
        raise ContractError("invalid_field", f"{where}: {name!r} is not a relative path inside the artifact")
    if name == MANIFEST_NAME:
        raise ContractError("invalid_field", f"{where}: the manifest cannot hash itself")


@dataclass(frozen=True)
class ReportCheck:
    name: str
    observed: float
    limit: float
    comparison: str

    def holds(self) -> bool:
        return COMPARISONS[self.comparison](self.observed, self.limit)

    def to_dict(self) -> dict[str, Any]:
        return {"name": self.name, "observed": self.observed, "limit": self.limit, "comparison": self.comparison}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ReportCheck:
        r = FieldReader(data, where)
        name = r.string("name")
        observed = r.number("observed")
        limit = r.number("limit")
        comparison = r.string("comparison")
        if comparison not in COMPARISONS:
            raise ContractError("invalid_field", f"{where}.comparison: must be one of {' '.join(COMPARISONS)}, got {comparison!r}")
        r.done()
        return cls(name, observed, limit, comparison)


@dataclass(frozen=True)
class ValidationReport:
    kind: str
    checkpoint_id: str
    checkpoint_revision: str
    precision: str
    shape_bucket: str
    target_abi: str
    checks: tuple[ReportCheck, ...]
    schema_version: int = REPORT_SCHEMA_VERSION

    @property
    def gated(self) -> bool:
        """The check its kind requires, holding the artifact to a real limit: a numerical report
        an SQNR check, a task report an agreement check, > or >= a positive limit (the native
        ValidationReport::Gated)."""
        needed = "sqnr" if self.kind == "numerical" else "agree"
        return any(needed in c.name and c.comparison in (">=", ">") and c.limit > 0 for c in self.checks)

    @property
    def passed(self) -> bool:
        return all(c.holds() for c in self.checks) and self.gated

    def to_dict(self) -> dict[str, Any]:
        return {
            "schema_version": self.schema_version, "kind": self.kind, "checkpoint_id": self.checkpoint_id,
            "checkpoint_revision": self.checkpoint_revision, "precision": self.precision,
            "shape_bucket": self.shape_bucket, "target_abi": self.target_abi,
            "checks": [c.to_dict() for c in self.checks],
        }

    @classmethod
    def from_dict(cls, data: Any, where: str = "report") -> ValidationReport:
        r = FieldReader(data, where)
        version = r.integer("schema_version")
        if version != REPORT_SCHEMA_VERSION:
            raise ContractError("invalid_field", f"{where}.schema_version: must be {REPORT_SCHEMA_VERSION}, got {version}")
        kind = r.string("kind")
        if kind not in REPORT_KINDS:
            raise ContractError("invalid_field", f"{where}.kind: must be numerical or task, got {kind!r}")
        checkpoint_id, checkpoint_revision = r.string("checkpoint_id"), r.string("checkpoint_revision")
        precision, shape_bucket, target_abi = r.string("precision"), r.string("shape_bucket"), r.string("target_abi")
        checks_json = r.array("checks")
        if not 1 <= len(checks_json) <= MAX_CHECKS:
            raise ContractError("invalid_field", f"{where}.checks: must hold 1 to {MAX_CHECKS} checks, got {len(checks_json)}")
        checks = tuple(ReportCheck.from_dict(c, f"{where}.checks[{i}]") for i, c in enumerate(checks_json))
        names = [c.name for c in checks]
        if len(set(names)) != len(names):
            raise ContractError("invalid_field", f"{where}.checks: check names must be unique")
        r.done()
        return cls(kind, checkpoint_id, checkpoint_revision, precision, shape_bucket, target_abi, checks)


@dataclass(frozen=True)
class ValidationRef:
    file: str
    passed: bool

    def to_dict(self) -> dict[str, Any]:
        return {"file": self.file, "passed": self.passed}

    @classmethod
    def from_dict(cls, data: Any, where: str) -> ValidationRef:
        r = FieldReader(data, where)
        value = cls(r.string("file"), r.boolean("passed"))
        r.done()
        return value


@dataclass(frozen=True)
class ArtifactMetadata:
    checkpoint_id: str
    checkpoint_revision: str
    precision: str
    runtime: str
    runtime_version: str
    target_abi: str
    adapter_version: str
    exporter_version: str
    compiler_version: str
    shape_bucket: str
    state_layout_version: int
    numerical_validation: ValidationRef
    task_validation: ValidationRef
    calibration_file: str | None = None

    def to_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {name: getattr(self, name) for name in ARTIFACT_STRING_FIELDS}
        out["state_layout_version"] = self.state_layout_version
        if self.calibration_file is not None:
            out["calibration_file"] = self.calibration_file
        out["numerical_validation"] = self.numerical_validation.to_dict()
        out["task_validation"] = self.task_validation.to_dict()
        return out

    @classmethod
    def from_dict(cls, data: Any, where: str = "metadata.artifact") -> ArtifactMetadata:
        r = FieldReader(data, where)
        strings = {name: r.string(name) for name in ARTIFACT_STRING_FIELDS}
        layout = r.integer("state_layout_version", minimum=1)
        calibration = r.optional_string("calibration_file")
        if calibration == "":
            raise ContractError("invalid_field", f"{where}.calibration_file: must be a non-empty string")
        numerical = ValidationRef.from_dict(r.obj("numerical_validation"), f"{where}.numerical_validation")
        task = ValidationRef.from_dict(r.obj("task_validation"), f"{where}.task_validation")
        r.done()
        return cls(**strings, state_layout_version=layout, numerical_validation=numerical,
                   task_validation=task, calibration_file=calibration)

    def check_report(self, report: ValidationReport, expected_kind: str, where: str) -> None:
        if report.kind != expected_kind:
            raise ContractError("report_mismatch", f"{where}: report kind is {report.kind!r}, expected {expected_kind!r}")
        for name in ("checkpoint_id", "checkpoint_revision", "precision", "shape_bucket", "target_abi"):
            if getattr(report, name) != getattr(self, name):
                raise ContractError("report_mismatch", f"{where}: report {name} {getattr(report, name)!r} "
                                    f"differs from the artifact's {getattr(self, name)!r}")


@dataclass(frozen=True)
class ArtifactManifest:
    component: str
    files: Mapping[str, str]
    artifact: ArtifactMetadata
    extra_metadata: Mapping[str, Any] = field(default_factory=dict)
    schema_version: int = MANIFEST_SCHEMA_VERSION

    def __post_init__(self) -> None:
        if not isinstance(self.component, str) or not self.component:
            raise ContractError("invalid_field", "manifest.component: must be a non-empty string")
        for name, digest in self.files.items():
            check_relative_name(name, f"manifest.files.{name}")
            if not isinstance(digest, str) or not _SHA256_HEX.match(digest):
                raise ContractError("invalid_field", f"manifest.files.{name}: expected a lowercase SHA-256 hex digest")
        refs = [("metadata.artifact.numerical_validation.file", self.artifact.numerical_validation.file),
                ("metadata.artifact.task_validation.file", self.artifact.task_validation.file)]
        if self.artifact.calibration_file is not None:
            refs.append(("metadata.artifact.calibration_file", self.artifact.calibration_file))
        for where, name in refs:
            if name not in self.files:
                raise ContractError("invalid_field", f"{where}: {name!r} is not among the hashed files")

    def to_dict(self) -> dict[str, Any]:
        metadata = dict(self.extra_metadata)
        metadata["artifact"] = self.artifact.to_dict()
        return {"schema_version": self.schema_version, "component": self.component,
                "files": dict(sorted(self.files.items())), "metadata": metadata}

    @classmethod
    def from_dict(cls, data: Any) -> ArtifactManifest:
        r = FieldReader(data, "manifest")
        version = r.integer("schema_version")
        if version != MANIFEST_SCHEMA_VERSION:
            raise ContractError("invalid_field", f"manifest.schema_version: must be {MANIFEST_SCHEMA_VERSION}, got {version}")
        component = r.string("component")
        files_json = r.obj("files")
        assert files_json is not None
        for name, digest in files_json.items():
            if not isinstance(digest, str):
                raise ContractError("invalid_field", f"manifest.files.{name}: expected a string")
        metadata = r.obj("metadata")
        assert metadata is not None
        artifact_json = metadata.get("artifact")
        if artifact_json is None:
            raise ContractError("invalid_field", "manifest.metadata.artifact: required field is missing")
        artifact = ArtifactMetadata.from_dict(artifact_json)
        extra = {k: v for k, v in metadata.items() if k != "artifact"}
        for key, value in extra.items():
            if not isinstance(value, Mapping):
                raise ContractError("invalid_field", f"manifest.metadata.{key}: expected an object")
        r.done()
        return cls(component, dict(files_json), artifact, extra, version)


@dataclass(frozen=True)
class VerifiedManifest:
    """A manifest whose files were re-hashed and whose reports were re-read."""

    directory: Path
    manifest: ArtifactManifest
    numerical: ValidationReport
    task: ValidationReport
    extra_files: tuple[str, ...] = ()  # in the directory but not in the manifest

    @property
    def qualified(self) -> bool:
        """Both reports passed, and nothing unhashed sits in the directory."""
        return self.numerical.passed and self.task.passed and not self.extra_files


def sha256_file(path: Path) -> str:
    digest = hashlib.sha256()
    with path.open("rb") as f:
        for block in iter(lambda: f.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def load_json_text(text: str | bytes, where: str) -> Any:
    def refuse_constant(name: str) -> Any:
        raise ContractError("invalid_json", f"{where}: {name} is not JSON")

    as_text = text.decode("utf-8", errors="replace") if isinstance(text, bytes) else text
    if not nesting_within(as_text):
        raise ContractError("invalid_json", f"{where}: nesting deeper than {MAX_DEPTH}")
    try:
        value = json.loads(text, parse_constant=refuse_constant)
    except (ValueError, RecursionError) as exc:
        if isinstance(exc, ContractError):
            raise
        raise ContractError("invalid_json", f"{where}: {exc}") from None
    check_text(value, where)
    return value


def _read_report(directory: Path, manifest: ArtifactManifest, ref: ValidationRef, kind: str, where: str) -> ValidationReport:
    try:
        report = ValidationReport.from_dict(load_json_text((directory / ref.file).read_bytes(), ref.file), ref.file)
    except ContractError as exc:
        raise ContractError("invalid_report", f"{where}: {exc.message}") from None
    manifest.artifact.check_report(report, kind, where)
    if report.passed != ref.passed:
        raise ContractError("report_mismatch",
                            f"{where}.passed is {str(ref.passed).lower()} but the report shows {str(report.passed).lower()}")
    return report


def read_manifest(directory: str | Path) -> VerifiedManifest:
    """Parse `manifest.json`, re-hash every file, re-read and re-evaluate both validation reports."""
    directory = Path(directory)
    path = directory / MANIFEST_NAME
    try:
        text = path.read_bytes()
    except OSError as exc:
        raise ContractError("manifest_unreadable", f"{path}: {exc.strerror or exc}") from None
    manifest = ArtifactManifest.from_dict(load_json_text(text, str(path)))
    root = directory.resolve()
    for name, expected in sorted(manifest.files.items()):
        file_path = directory / name
        if not file_path.resolve().is_relative_to(root):
            raise ContractError("invalid_field", f"manifest.files.{name}: resolves outside the artifact")
        if not file_path.is_file():
            raise ContractError("file_missing", f"{name}: listed in the manifest but missing")
        actual = sha256_file(file_path)
        if actual != expected:
            raise ContractError("hash_mismatch", f"{name}: SHA-256 {actual} != manifest {expected}")
    art = manifest.artifact
    numerical = _read_report(directory, manifest, art.numerical_validation, "numerical", "metadata.artifact.numerical_validation")
    task = _read_report(directory, manifest, art.task_validation, "task", "metadata.artifact.task_validation")
    # What sits in the directory but is not hashed: a graph could reach it.
    extra = sorted(p.relative_to(directory).as_posix() for p in directory.rglob("*")
                   if (p.is_symlink() or not p.is_dir()) and p.relative_to(directory).as_posix() != MANIFEST_NAME
                   and p.relative_to(directory).as_posix() not in manifest.files)
    return VerifiedManifest(directory, manifest, numerical, task, tuple(extra))
