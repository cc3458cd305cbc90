"""`omni-edge matrix` (device routes x model families, derived from qualification records; and
recording one) and `omni-edge aihub` (compile or profile a QNN component on Qualcomm AI Hub's
hosted devices)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any

from omni_edge.cli import flags
from omni_edge.files import write_text_atomic


def add_parsers(sub: Any) -> None:
    from omni_edge.harness.qualification.matrix import DEFAULT_STORE, EXECUTIONS

    p = sub.add_parser("aihub", help="compile or profile a QNN component on Qualcomm AI Hub's hosted devices")
    p.add_argument("kind", choices=["compile", "profile"])
    p.add_argument("--artifact", type=Path, required=True, help="a QNN component directory (thinker-qnn-<soc>-<precision>)")
    p.add_argument("--device", required=True, help='an AI Hub device name, e.g. "Samsung Galaxy S25"')
    p.add_argument("--iterations", type=flags.positive, default=20, help="profile: runs per graph on the device")
    p.add_argument("--dry-run", action="store_true", help="print the requests as JSON lines and submit nothing")
    p.set_defaults(func=aihub)

    p = sub.add_parser("matrix", help="device routes × model families, derived from qualification records")
    p.add_argument("action", nargs="?", choices=["show", "record"], default="show")
    p.add_argument("--store", type=Path, default=DEFAULT_STORE)
    fmt = p.add_mutually_exclusive_group()
    fmt.add_argument("--json", action="store_true")
    fmt.add_argument("--html", type=Path, default=None, help="write an HTML table here")
    p.add_argument("--route")
    p.add_argument("--family")
    p.add_argument("--artifact", type=Path, help="record: the component that ran")
    p.add_argument("--plan", type=Path, help="record: the plan that ran (every stage's component; a multi-stage family)")
    p.add_argument("--execution", choices=EXECUTIONS, default="device")
    p.add_argument("--profile-report", type=Path, default=None, help="record: a profile's report.json")
    p.add_argument("--blocked-layer", default=None, help="record a failure: the layer that failed")
    p.add_argument("--reason", default=None)
    p.add_argument("--log", type=Path, default=None, help="record a failure: the log that shows it")
    p.add_argument("--command-line", default=None, help="record: the command that produced the evidence")
    p.set_defaults(func=matrix)


def matrix(args: argparse.Namespace) -> int:
    from omni_edge.harness.qualification import matrix

    try:
        if args.action == "record":
            if args.route is None or args.family is None:
                raise matrix.RecordError("record needs --route and --family")
            if args.blocked_layer:
                if args.log is None:
                    raise matrix.RecordError("a blocked record needs --log: the failure log is its evidence")
                path = matrix.record_blocked(args.store, args.route, args.family, args.blocked_layer,
                                             args.reason or "", args.log, args.command_line or "")
            elif args.plan is not None:
                if args.artifact is not None:
                    raise matrix.RecordError("record takes --artifact or --plan, not both")
                path = matrix.record_from_plan(args.store, args.route, args.family, args.plan, args.execution,
                                               args.command_line or "", args.profile_report)
            else:
                if args.artifact is None:
                    raise matrix.RecordError("record needs --artifact or --plan (or --blocked-layer with --log)")
                path = matrix.record_from_artifact(args.store, args.route, args.family, args.artifact,
                                                   args.execution, args.command_line or "", args.profile_report)
            print(path)
            return 0
        cells = matrix.matrix(args.store)
    except (ValueError, KeyError, OSError) as exc:  # RecordError, ContractError and JSON errors are ValueErrors
        print(f"omni-edge matrix: {exc}", file=sys.stderr)
        return 1
    if args.json:
        print(json.dumps([c.to_dict() for c in cells], indent=1))
    elif args.html:
        write_text_atomic(args.html, matrix.render_html(cells))
        print(f"wrote {args.html}", file=sys.stderr)
    else:
        sys.stdout.write(matrix.render_text(cells))
    return 0


def aihub(args: argparse.Namespace) -> int:
    from dataclasses import asdict

    from omni_edge.harness.qualification import aihub

    try:
        requests = aihub.build_requests(args.kind, args.artifact, args.device, iterations=args.iterations)
        if args.dry_run:
            for request in requests:
                print(json.dumps(asdict(request)))
            return 0
        evidence = aihub.submit(requests, aihub.client())
    except aihub.AihubError as exc:
        print(f"omni-edge aihub: {exc}", file=sys.stderr)
        return 2
    print(f"AI Hub results in {evidence}")
    return 0
