"""omni_edge.artifacts: artifact directories, hashed manifests v2 and their validation reports."""

from omni_edge.artifacts.writer import write_manifest, write_report

__all__ = ["write_manifest", "write_report"]
