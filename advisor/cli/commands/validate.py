"""`advisor validate`: run short real steps of the given strategies here, then print predicted
(before and after calibration) vs measured per-GPU peak memory and step time, with the % error.

    advisor validate --profile NAME --model llama-3-8b --strategies ddp,fsdp,zero2,zero3
    advisor validate --profile NAME --report validation.md --report validation.html

The run keeps the model's layer shape (hidden, heads, ffn, vocab) with a few layers (--layers,
default 2), and the prediction is made for exactly that network. The measurement runs through
torchrun (`python -m calibration measure`); this process never imports torch.
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("validate", help="predicted vs measured memory and step time on this machine")
    p.add_argument("--profile", required=True, help="stored profile (see `advisor profiles`)")
    p.add_argument("--model", help="model preset whose layer shape to run (default: the profile's runs')")
    for flag in ("hidden", "heads", "kv-heads", "ffn", "vocab"):
        p.add_argument(f"--{flag}", type=int, help="override the run's shape" if flag == "hidden" else None)
    p.add_argument("--layers", type=int, help="decoder layers to run (default 2; 3 in CPU mode)")
    p.add_argument("--seq-len", type=int)
    p.add_argument("--micro-batch", type=int)
    p.add_argument("--steps", type=int, help="timed steps per strategy")
    p.add_argument("--strategies", default="ddp,fsdp,zero2,zero3",
                   help="comma-separated subset of ddp,fsdp,zero1,zero2,zero2-offload,zero3")
    p.add_argument("--nproc", type=int, help="processes (default: the profile's GPUs per node)")
    p.add_argument("--report", action="append", default=[],
                   help="write the report here: .md or .html (repeatable)")
    p.add_argument("--json", action="store_true")
    p.set_defaults(run=run)


CPU_MAX_HIDDEN = 1024  # CPU mode runs tiny shapes: anything larger takes minutes per strategy


def _run_args(args: argparse.Namespace, cpu: bool) -> list[str]:
    from advisor.core.errors import InvalidInput
    from advisor.profiles.validation import runnable_strategies

    names = [s.strip() for s in args.strategies.split(",") if s.strip()]
    runnable = runnable_strategies()
    bad = [n for n in names if n not in runnable]
    if bad or not names:
        raise InvalidInput("strategies", f"cannot run {', '.join(bad) or 'nothing'}",
                           ", ".join(runnable))
    out = ["measure", "--strategies", ",".join(names)]
    if args.model:
        from advisor.core.model import preset

        if cpu and preset(args.model).hidden > CPU_MAX_HIDDEN and not args.hidden:
            raise InvalidInput("model", f"{args.model} (hidden {preset(args.model).hidden}) is too large "
                               "for CPU mode", f"shape flags with --hidden <= {CPU_MAX_HIDDEN}")
        out += ["--model", args.model]
    for flag in ("hidden", "heads", "kv_heads", "ffn", "vocab", "layers", "seq_len", "micro_batch", "steps"):
        if getattr(args, flag) is not None:
            out += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    return out


def run(args: argparse.Namespace) -> int:
    import dataclasses
    import json
    import sys
    import tempfile
    from pathlib import Path

    from advisor.cli.commands.calibrate import count_gpus, launch
    from advisor.core.errors import InvalidInput
    from advisor.profiles import validation as validate
    from advisor.profiles.store import write_atomic
    from advisor.profiles.use import get_profile

    profile = get_profile(args.profile)
    cpu = profile.fingerprint.device == "cpu"
    gpus = count_gpus()
    if not cpu and not gpus:
        raise InvalidInput("profile", f"{args.profile!r} was measured on GPUs; this machine has none",
                           "a CPU-mode profile, or run on the profiled GPUs")
    for path in args.report:
        if Path(path).suffix not in (".md", ".html"):
            raise InvalidInput("report", f"{path}: unknown report kind", ".md or .html")
    nproc = args.nproc or profile.fingerprint.gpus_per_node
    with tempfile.TemporaryDirectory(prefix="advisor-validate-") as tmp:
        out = Path(tmp) / "runs.json"
        code = launch([*_run_args(args, cpu), "--out", str(out)], nproc, 0 if cpu else gpus,
                      stdout=sys.stderr)
        if code or not out.exists():
            print(f"advisor validate: the strategy runs failed (exit {code})", file=sys.stderr)
            return 1
        measured = json.loads(out.read_text())
    if measured["fingerprint"]["device"] != profile.fingerprint.device:
        raise InvalidInput("profile", f"{args.profile!r} is a {profile.fingerprint.device} profile; the "
                           f"runs here were on {measured['fingerprint']['device']}")
    result = validate.compare(profile, measured["runs"])
    for path in args.report:
        text = validate.html(result) if path.endswith(".html") else validate.markdown(result)
        write_atomic(Path(path), text)
    if args.json:
        print(json.dumps(dataclasses.asdict(result), indent=2))
    else:
        _print(result)
    for path in args.report:
        print(f"report written to {path}", file=sys.stderr)
    return 0


def _print(result) -> None:
    from rich.table import Table

    from advisor.cli.report import make_console
    from advisor.profiles.validation import HEADER, table_rows

    console = make_console()
    table = Table(title=f"Predicted vs measured, profile {result.profile}: {result.device}",
                  title_justify="left")
    for col in HEADER:
        table.add_column(col, justify="left" if col == "strategy" else "right")
    for row in table_rows(result):
        table.add_row(*row)
    console.print(table)
    console.print(f"model run: {result.model}; {result.workload}")
    console.print(f"memory: {result.memory_kind}; before = shipped priors, after = the profile's")
    for note in result.notes:
        console.print(f"note: {note}")
