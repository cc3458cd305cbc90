"""`omni-edge`: the one command line of the project; each subcommand lives with its module."""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Sequence
from pathlib import Path

from omni_edge import __version__


def _conformance(args: argparse.Namespace) -> int:
    from omni_edge.harness.conformance import expand, run_fixtures

    impls = ["python", "native"] if args.impl == "both" else [args.impl]
    failed = total = 0
    for check in run_fixtures(expand(args.fixtures), impls):
        total += 1
        failed += not check.ok
        if not check.ok or not args.quiet:
            print(check.line())
    print(f"{total - failed}/{total} checks passed ({', '.join(impls)})", file=sys.stderr)
    return 1 if failed or total == 0 else 0


def _verify(args: argparse.Namespace) -> int:
    from omni_edge import implementations
    from omni_edge.contracts import ContractError

    code = 0
    for name in ["python", "native"] if args.impl == "both" else [args.impl]:
        try:
            verified = implementations.get(name).read_manifest(args.artifact)
        except ContractError as exc:
            print(f"[{name}] {args.artifact}: REFUSED {exc.code}: {exc.message}")
            code = 1
            continue
        art = verified.manifest.artifact
        status = "qualified" if verified.qualified else "NOT qualified"
        print(f"[{name}] {args.artifact}: {len(verified.manifest.files)} files re-hashed, "
              f"reports re-checked: {status} ({verified.manifest.component}, {art.precision}, {art.shape_bucket})")
        if args.json:
            print(json.dumps(verified.manifest.to_dict(), indent=2))
        code |= 0 if verified.qualified else 1
    return code


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="omni-edge", description="On-device Omni-style multi-stage model serving.")
    parser.add_argument("--version", action="version", version=f"omni-edge {__version__}")
    sub = parser.add_subparsers(dest="command", required=True)

    p = sub.add_parser("conformance", help="run stage-contract fixtures against the Python and native implementations")
    p.add_argument("fixtures", nargs="+", type=Path, help="fixture JSON files or directories of them")
    p.add_argument("--impl", choices=["python", "native", "both"], default="both")
    p.add_argument("--quiet", action="store_true", help="print failed checks only")
    p.set_defaults(func=_conformance)

    p = sub.add_parser("verify", help="re-hash an artifact directory and re-check its validation reports")
    p.add_argument("artifact", type=Path)
    p.add_argument("--impl", choices=["python", "native", "both"], default="both")
    p.add_argument("--json", action="store_true", help="also print the manifest")
    p.set_defaults(func=_verify)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    result: int = args.func(args)
    return result


if __name__ == "__main__":
    sys.exit(main())
