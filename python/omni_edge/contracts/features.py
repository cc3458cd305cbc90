"""Protocol versions and the features each offers (CONTRACT.md, "Versions and features")."""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from omni_edge.contracts.errors import ContractError

PROTOCOL_FEATURES: dict[int, frozenset[str]] = {
    1: frozenset({"host-copy", "request-epochs"}),
    2: frozenset({"host-copy", "request-epochs", "backend-state", "ordered-events", "credit-ack", "artifact-manifest-v2"}),
}
CURRENT_PROTOCOL = 2


def negotiate(version: Any, required: Iterable[Any]) -> list[str]:
    """Return the sorted features of `version`, or refuse an unknown version or a missing feature."""
    if isinstance(version, bool) or not isinstance(version, int) or version not in PROTOCOL_FEATURES:
        raise ContractError("unsupported_version", f"protocol_version: unknown protocol version {version!r} (known: 1, 2)")
    if isinstance(required, (str, bytes)):
        raise ContractError("invalid_field", "required_features: expected an array of strings")
    wanted = list(required)
    for i, name in enumerate(wanted):
        if not isinstance(name, str):
            raise ContractError("invalid_field", f"required_features[{i}]: expected a string")
    offered = PROTOCOL_FEATURES[version]
    missing = sorted(set(wanted) - offered)
    if missing:
        raise ContractError("missing_features", f"protocol {version} does not offer: {', '.join(missing)}")
    return sorted(offered)
