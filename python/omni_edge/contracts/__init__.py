"""The Omni stage contract, protocol v2: the Python reference implementation (see CONTRACT.md)."""

from omni_edge.contracts.controller import BackendIdentity, EmitResult, StageController
from omni_edge.contracts.errors import ContractError
from omni_edge.contracts.features import CURRENT_PROTOCOL, PROTOCOL_FEATURES, negotiate
from omni_edge.contracts.manifest import (
    MANIFEST_NAME,
    ArtifactManifest,
    ArtifactMetadata,
    ReportCheck,
    ValidationRef,
    ValidationReport,
    VerifiedManifest,
    read_manifest,
    sha256_file,
)
from omni_edge.contracts.stream import EventStream, StreamLimits, SubmitResult
from omni_edge.contracts.types import BufferRef, DeviceDescriptor, StageEvent, StageRequest, StateHandle

__all__ = [
    "CURRENT_PROTOCOL", "MANIFEST_NAME", "PROTOCOL_FEATURES", "ArtifactManifest", "ArtifactMetadata",
    "BackendIdentity", "BufferRef", "ContractError", "DeviceDescriptor", "EmitResult", "EventStream",
    "ReportCheck", "StageController", "StageEvent", "StageRequest", "StateHandle", "StreamLimits",
    "SubmitResult", "ValidationRef", "ValidationReport", "VerifiedManifest", "negotiate", "read_manifest",
    "sha256_file",
]
