"""omni_edge.runtime: the native controller from Python (the code a device runs).

    session      one session per plan, with methods per plan kind (Session, SpeechSession, ...)
    request      a request's fields as the C ABI reads them (prompt, media, sampling, observation)
    observation  a policy's OBS.json read strictly
    media        images and audio as the encoders read them; WAV files
    native       the contract types and stream over the extension (the native implementation)
    implementations  the Python reference and the native controller behind one interface

The session classes are imported on first use, so that importing a small module of this package
does not load the extension."""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from omni_edge.runtime.session import (
        OmniResult,
        OmniSession,
        PolicySession,
        Session,
        SpeechSession,
        Utterance,
        playback_stats,
        write_wav,
    )

__all__ = ["OmniResult", "OmniSession", "PolicySession", "Session", "SpeechSession", "Utterance", "playback_stats",
           "write_wav"]
_SESSION_NAMES = frozenset(__all__)


def __getattr__(name: str) -> Any:
    if name in _SESSION_NAMES:
        return getattr(importlib.import_module("omni_edge.runtime.session"), name)
    raise AttributeError(f"module 'omni_edge.runtime' has no attribute {name!r}")
