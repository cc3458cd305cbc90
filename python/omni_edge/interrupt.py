"""The cancel contract of the run, speak and act commands, as omni-edge-run keeps it: SIGINT, SIGTERM
or SIGHUP at any moment, loading included, cancels the request at every stage's next step; each
stream's last JSON line is then its one terminal event ("cancelled"), the audio streamed so far
is written, and the exit code is 128 + the signal (130 for Ctrl-C).

Python runs signal handlers only on the main thread between bytecodes, so a request runs on a
worker thread while the main thread waits: the handler then cancels within milliseconds instead
of after the next event (or never, during a long prefill)."""

from __future__ import annotations

import signal
import threading
from collections.abc import Callable
from types import FrameType
from typing import Any, TypeVar

_T = TypeVar("_T")
SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
# The omni-edge commands that keep this contract from the process's first line to its exit.
GUARDED_COMMANDS = ("run", "speak", "act", "serve")


class CancelOnSignal:
    """Install once, before loading; give it the session once it is open; run the request
    through run()."""

    def __init__(self) -> None:
        self.signal = 0
        self._session: Any = None

    def install(self) -> CancelOnSignal:
        """Idempotent; only the main thread can install handlers (elsewhere this does nothing)."""
        if threading.current_thread() is threading.main_thread():
            for signo in SIGNALS:
                signal.signal(signo, self._on_signal)
        return self

    def _on_signal(self, signo: int, frame: FrameType | None) -> None:
        self.signal = signo
        if self._session is not None:
            self._session.cancel()  # atomic stores in the native session

    def ignore_until_exit(self) -> None:
        """At the command's end: the interpreter's shutdown resets a Python handler to the default
        action, and a signal arriving then would kill a process whose request already ended (exit
        -2, not its 0 or 130). Ignored signals stay ignored through the shutdown, in every thread."""
        if threading.current_thread() is threading.main_thread():
            for signo in SIGNALS:
                signal.signal(signo, signal.SIG_IGN)

    @property
    def cancelled(self) -> bool:
        return self.signal != 0

    @property
    def exit_code(self) -> int:
        return 128 + self.signal

    def keep_going(self) -> bool:
        """For event callbacks: False once a signal came (a cancel that raced the request's start)."""
        return self.signal == 0

    def run(self, session: Any, request: Callable[[], _T]) -> _T:
        """request() on a worker thread, cancelled through `session` on a signal; its result or
        its exception."""
        self._session = session
        if self.cancelled:
            session.cancel()
        outcome: dict[str, Any] = {}

        def work() -> None:
            try:
                outcome["result"] = request()
            except BaseException as exc:  # re-raised on the main thread
                outcome["error"] = exc

        worker = threading.Thread(target=work, name="omni-edge-request", daemon=True)
        worker.start()
        try:
            while worker.is_alive():
                worker.join(0.05)  # wakes for signal handlers
        finally:
            self._session = None
        if "error" in outcome:
            raise outcome["error"]
        result: _T = outcome["result"]
        return result


# The CLI's one guard: omni_edge/__init__.py installs it first thing when the process is one of
# GUARDED_COMMANDS, so a signal during the imports is recorded instead of raising there.
GUARD = CancelOnSignal()
