"""The project's own lines on the terminal; third-party chatter in a log file beside the output.

Exporters are loud: torch's tracer and exporter warnings, deprecation warnings raised once per
pytree node, ExecuTorch's native info lines. Inside `third_party_to_log(log)` the process's
stderr descriptor points at the log (so native libraries and loggers created before it write
there), Python warnings and loggers without a handler write there too, and `sys.stderr` is a new stream on the terminal:
our progress bars and messages, created inside, still reach the person running the command.
"""

from __future__ import annotations

import logging
import os
import sys
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any, TextIO


def _import_loud_libraries() -> None:
    # Imported here, before the switch, so the handlers they install at import time hold the
    # stderr that will point at the log (torch's logging, transformers' library logger).
    import torch  # noqa: F401
    from transformers.utils import logging as hf_logging

    hf_logging.get_logger("transformers")  # its handler is made on the first logger asked for


@contextmanager
def _no_transformers_bars() -> Iterator[None]:
    """transformers draws its loading bars ("Loading weights", "Writing model shards") on
    sys.stderr, the terminal here: third-party output, so off while the log takes it."""
    from transformers.utils import logging as hf_logging

    was = hf_logging.is_progress_bar_enabled()
    hf_logging.disable_progress_bar()  # type: ignore[no-untyped-call]
    try:
        yield
    finally:
        if was:
            hf_logging.enable_progress_bar()  # type: ignore[no-untyped-call]


@contextmanager
def third_party_to_log(log: Path, *, verbose: bool = False) -> Iterator[Path]:
    """Everything but the project's own stderr lines goes to `log` (appended); `verbose` keeps
    all of it on the terminal as before."""
    if verbose:
        yield log
        return
    _import_loud_libraries()
    log.parent.mkdir(parents=True, exist_ok=True)
    sys.stdout.flush()
    sys.stderr.flush()
    with open(log, "a", encoding="utf-8", errors="backslashreplace", buffering=1) as sink:
        saved_fd = os.dup(2)
        terminal: TextIO = os.fdopen(saved_fd, "w", encoding="utf-8", errors="backslashreplace", buffering=1)
        previous_stderr, previous_show = sys.stderr, warnings.showwarning

        def show(message: Any, category: type[Warning], filename: str, lineno: int, file: Any = None,
                 line: str | None = None) -> None:
            sink.write(warnings.formatwarning(message, category, filename, lineno, line))

        previous_last_resort = logging.lastResort  # where a logger without handlers writes
        os.dup2(sink.fileno(), 2)
        sys.stderr, warnings.showwarning = terminal, show
        logging.lastResort = logging.StreamHandler(sink)
        try:
            with _no_transformers_bars():
                yield log
        finally:
            terminal.flush()
            sink.flush()
            os.dup2(saved_fd, 2)
            sys.stderr, warnings.showwarning = previous_stderr, previous_show
            logging.lastResort = previous_last_resort
            terminal.close()


def log_beside(out: Path) -> Path:
    """OUT.export.log beside an export's OUT directory."""
    return out.parent / f"{out.name}.export.log"


def quietly(args: Any, log: Path, step: Callable[[], int]) -> int:
    """Runs `step()` with third-party warnings and native logs in `log` (on screen with --verbose)."""
    with third_party_to_log(log, verbose=args.verbose):
        status = step()
    if not args.verbose and log.is_file() and log.stat().st_size:
        print(f"third-party warnings and logs: {log} (--verbose shows them here)", file=sys.stderr)
    return status
