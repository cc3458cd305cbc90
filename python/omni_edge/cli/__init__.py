"""`omni-edge`: the one command line of the project, one module per command group.

    export.py         make-checkpoint, export llm|tts|policy|omni
    run.py            run, speak, act (one request through a plan, in-process or on a device)
    serve.py          serve (the plan over HTTP: OpenAI, OpenPI; here or on a device)
    verify.py         verify, conformance
    deploy.py         devices, push, bundle
    profile.py        profile, budget
    qualification.py  matrix, aihub
    demo.py           demo (the README's main job)
    flags.py          every flag two commands share, declared once
    output.py, console.py   what the commands print; third-party logs kept apart
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from omni_edge import __version__
from omni_edge.interrupt import GUARD, GUARDED_COMMANDS


def build_parser() -> argparse.ArgumentParser:
    from omni_edge.cli import demo, deploy, export, profile, qualification, run, serve, verify

    parser = argparse.ArgumentParser(prog="omni-edge", description="On-device Omni-style multi-stage model serving.")
    parser.add_argument("--version", action="version", version=f"omni-edge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)
    for group in (verify, export, qualification, run, serve, deploy, profile, demo):
        group.add_parsers(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    # The cancel contract's commands: the guard is on from omni_edge/__init__.py's first line
    # (installed again here for a caller that passes argv), and stays through the process's exit.
    guarded = list(sys.argv[1:] if argv is None else argv)[:1] in [[c] for c in GUARDED_COMMANDS]
    if guarded:
        GUARD.install()
    args = build_parser().parse_args(argv)
    try:
        result: int = args.func(args)
    finally:
        if guarded and argv is None:  # the process ends here: keep the contract through its shutdown
            sys.stdout.flush()
            GUARD.ignore_until_exit()
    return result
