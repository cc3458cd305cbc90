"""`omni-edge verify` (re-hash artifacts, plans and bundles and re-check their reports, through
the Python reference and the native controller) and `omni-edge conformance` (the stage-contract
fixtures against both)."""

from __future__ import annotations

import argparse
import json
import sys
from pathlib import Path
from typing import Any


def add_parsers(sub: Any) -> None:
    p = sub.add_parser("conformance", help="run stage-contract fixtures against the Python and native implementations")
    p.add_argument("fixtures", nargs="+", type=Path, help="fixture JSON files or directories of them")
    _implementations(p)
    p.add_argument("--quiet", action="store_true", help="print failed checks only")
    p.set_defaults(func=conformance)

    p = sub.add_parser("verify", help="re-hash artifacts and re-check their reports: what export or bundle wrote")
    p.add_argument("artifact", type=Path, help="a component directory, a plan, an export directory (every component "
                                               "and plan in it) or a bundle directory (with bundle.json)")
    _implementations(p)
    p.add_argument("--json", action="store_true", help="also print the manifest")
    p.set_defaults(func=verify)


def _implementations(p: argparse.ArgumentParser) -> None:
    p.add_argument("--impl", choices=["python", "native", "both"], default="both",
                   help="the contract's Python reference, the native controller, or both")


def _chosen(args: argparse.Namespace) -> list[str]:
    return ["python", "native"] if args.impl == "both" else [args.impl]


def verify(args: argparse.Namespace) -> int:
    from omni_edge.contracts import ContractError
    from omni_edge.harness.qualification.verify_targets import VerifyTargetError, resolve
    from omni_edge.runtime import implementations

    if (args.artifact / "bundle.json").is_file():
        return _verify_bundle(args.artifact)
    try:
        targets = resolve(args.artifact)
    except VerifyTargetError as exc:
        print(f"{exc}")
        return 1
    qualified: dict[Path, bool] = {}
    for component in targets.components:
        shown = args.artifact if targets.components == [args.artifact] else component
        qualified[component] = True
        for name in _chosen(args):
            try:
                verified = implementations.get(name).read_manifest(component)
            except ContractError as exc:
                print(f"[{name}] {shown}: REFUSED {exc.code}: {exc.message}")
                qualified[component] = False
                continue
            art = verified.manifest.artifact
            status = "qualified" if verified.qualified else "NOT qualified"
            extra = f"; not in the manifest: {', '.join(verified.extra_files)}" if verified.extra_files else ""
            print(f"[{name}] {shown}: {len(verified.manifest.files)} files re-hashed, reports re-checked: {status} "
                  f"({verified.manifest.component}, {art.precision}, {art.shape_bucket}){extra}")
            if args.json:
                print(json.dumps(verified.manifest.to_dict(), indent=2))
            qualified[component] &= verified.qualified
    for plan in targets.plans:
        bad = [c.name for c in plan.components if not qualified[c]]
        names = ", ".join(c.name for c in plan.components)
        print(f"{plan.plan}: {'every component qualified' if not bad else 'NOT qualified: ' + ', '.join(bad)} ({names})")
    return 0 if all(qualified.values()) else 1


def _verify_bundle(root: Path) -> int:
    from omni_edge.harness.deploy.bundle import BundleError, verify_bundle

    try:
        report = verify_bundle(root)
    except BundleError as exc:
        print(f"{root}: REFUSED {exc}")
        return 1
    print(f"{root}: bundle for {report['target']} ({report['abi']}): {report['files']} files re-hashed, binaries are {report['abi']}")
    print(json.dumps(report))
    return 0


def conformance(args: argparse.Namespace) -> int:
    from omni_edge.harness.conformance import expand, run_fixtures

    impls = _chosen(args)
    failed = total = 0
    for check in run_fixtures(expand(args.fixtures), impls):
        total += 1
        failed += not check.ok
        if not check.ok or not args.quiet:
            print(check.line())
    print(f"{total - failed}/{total} checks passed ({', '.join(impls)})", file=sys.stderr)
    return 1 if failed or total == 0 else 0
