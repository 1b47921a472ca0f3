"""`advisor profiles`: the stored calibration profiles; show, export and import one.

    advisor profiles [--all] [--json]
    advisor profiles show NAME [--json]
    advisor profiles export NAME [--out FILE]
    advisor profiles import FILE [--name NEW_NAME]
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("profiles", help="stored calibration profiles (list, show, export, import)")
    p.add_argument("--all", action="store_true", help="every stored version, not only the newest per name")
    p.add_argument("--json", action="store_true")
    actions = p.add_subparsers(dest="action")
    show = actions.add_parser("show", help="one profile's fitted terms")
    show.add_argument("name")
    show.add_argument("--json", action="store_true")
    export = actions.add_parser("export", help="a profile as JSON (stdout, or --out FILE)")
    export.add_argument("name")
    export.add_argument("--out")
    imp = actions.add_parser("import", help="store a profile JSON file")
    imp.add_argument("path")
    imp.add_argument("--name", help="store it under this name instead")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import json
    import sys
    from pathlib import Path

    from advisor.profiles import store as profile_store
    from advisor.profiles import use as profiles

    if args.action == "export":
        text = profiles.export_profile(args.name)
        if args.out:
            profile_store.write_atomic(Path(args.out), text)
        else:
            print(text)
        return 0
    if args.action == "import":
        profile, version = profiles.import_profile(Path(args.path), args.name)
        print(f"stored profile '{profile.name}' (version {version}) in {profile_store.store_path()}")
        return 0
    if args.action == "show":
        profile = profiles.get_profile(args.name)
        if args.json:
            print(profile.model_dump_json(indent=2))
        else:
            _print_profile(profile)
        return 0
    found = profiles.listing(all_versions=args.all)
    if args.json:
        print(json.dumps([r.model_dump(mode="json") for r in found.items], indent=2))
    else:
        _print_list(found.items, profile_store.store_path())
    for row in found.skipped:  # never used; say why so the row can be found and replaced
        print(f"advisor: skipped stored profile version {row.version}: {row.reason}", file=sys.stderr)
    return 0


def _print_list(rows: list, store) -> None:
    from rich.table import Table

    from advisor.cli.report import make_console

    console = make_console()
    if not rows:
        console.print(f"No profiles in {store}. Run `advisor calibrate` (or import one).")
        return
    table = Table(title=f"Calibration profiles in {store}", title_justify="left")
    for col in ("name", "version", "created (UTC)", "device", "catalog GPU", "nodes x GPUs", "quick",
                "terms", "fingerprint"):
        table.add_column(col)
    for r in rows:
        terms = f"{len(r.terms)}" + (f" ({len(r.missing_terms)} missing)" if r.missing_terms else "")
        table.add_row(r.name, str(r.version), r.created_at.replace("T", " ")[:19], r.gpu_name,
                      r.catalog_gpu or "-", f"{r.nodes} x {r.gpus_per_node}", "yes" if r.quick else "no",
                      terms, r.fingerprint_key)
    console.print(table)


def _print_profile(profile) -> None:
    from rich.table import Table

    from advisor.cli.report import make_console
    from advisor.profiles.schema import missing_terms

    fp = profile.fingerprint
    console = make_console()
    console.print(f"[bold]{profile.name}[/bold]  {fp.nodes} x {fp.gpus_per_node} {fp.gpu_name} "
                  f"(catalog: {profile.catalog_gpu or '-'}), torch {fp.torch}, CUDA {fp.cuda or '-'}, "
                  f"NCCL {fp.nccl or '-'}, driver {fp.driver or '-'}; {profile.created_at}")
    console.print(f"made by: {profile.command}")
    for note in profile.notes:
        console.print(f"note: {note}")
    table = Table(title="Fitted terms (override the shipped priors)", title_justify="left")
    for col in ("term", "value", "±1σ", "samples", "how"):
        table.add_column(col)
    for t in profile.fit:
        value = ", ".join(f"{v:.3g}" for v in t.value) if isinstance(t.value, list) else f"{t.value:.4g}"
        table.add_row(t.term, value, f"{100 * t.sigma:.0f}%", str(t.samples), t.how)
    console.print(table)
    missing = missing_terms(profile)
    if missing:
        console.print(f"not fitted (shipped priors stay): {', '.join(missing)}")
