"""omni_edge.artifacts: artifact directories, hashed manifests v2 and their validation reports."""

from omni_edge.artifacts.writer import (
    identity_report,
    new_component,
    pending_task,
    write_manifest,
    write_report,
    write_validated,
)

__all__ = ["identity_report", "new_component", "pending_task", "write_manifest", "write_report", "write_validated"]
