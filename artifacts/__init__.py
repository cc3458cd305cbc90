"""omni_edge.artifacts: artifact directories, hashed manifests v2 and their validation reports."""

from omni_edge.artifacts.writer import new_component, write_manifest, write_report

__all__ = ["new_component", "write_manifest", "write_report"]
