"""Quiet output: inside third_party_to_log only the project's own stderr lines reach the terminal;
warnings, handler-less loggers and native writes to fd 2 land in the log; --verbose keeps all."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

SCRIPT = """
import logging, os, sys, warnings
from pathlib import Path
from omni_edge.cli.console import third_party_to_log
with third_party_to_log(Path(sys.argv[1]), verbose=sys.argv[2] == "1"):
    warnings.warn("a tracer warning", UserWarning)
    logging.getLogger("somelib").warning("a library's log line")
    os.write(2, b"a native info line\\n")
    from transformers.utils import logging as hf_logging
    for _ in hf_logging.tqdm(range(3), desc="a library's bar"):
        pass
    hf_logging.get_logger("transformers.modeling_utils").warning("a transformers warning")
    print("our progress line", file=sys.stderr)
print("after the block", file=sys.stderr)
"""


def _run(tmp_path: Path, verbose: bool) -> tuple[str, str]:
    log = tmp_path / f"out-{verbose}.log"
    done = subprocess.run([sys.executable, "-c", SCRIPT, str(log), "1" if verbose else "0"], capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr
    return done.stderr, log.read_text() if log.exists() else ""


def test_third_party_lines_go_to_the_log_and_ours_stay_on_screen(tmp_path: Path) -> None:
    screen, log = _run(tmp_path, verbose=False)
    assert screen.splitlines() == ["our progress line", "after the block"], screen
    for line in ("a tracer warning", "a library's log line", "a native info line", "a transformers warning"):
        assert line in log and line not in screen
    assert "a library's bar" not in screen
    screen, log = _run(tmp_path, verbose=True)
    assert log == "" and all(line in screen for line in ("a tracer warning", "a native info line", "our progress",
                                                         "a library's bar"))
