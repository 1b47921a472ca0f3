"""The `advisor` command. Thin: flags -> request -> advisor functions -> report or JSON.

Every user error exits 2 with one line naming the field and what is allowed; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import sys

from advisor.cli.flags import OneLineParser, add_model_flags, join_negative_values
from advisor.cli.flags import request_data as flag_values
from advisor.core.errors import AdvisorError, InvalidInput

# Subcommands that live in their own modules: each has `add_parser(subparsers)` and
# `run(args) -> int`, imports only argparse at module level, and imports heavy code inside run.
EXTRA_COMMANDS: tuple[str, ...] = ("advisor.cli.commands.emit", "advisor.cli.commands.serve",
                                   "advisor.cli.commands.calibrate", "advisor.cli.commands.profiles",
                                   "advisor.cli.commands.validate")


def add_job_flags(p: argparse.ArgumentParser, request: type | None = None) -> None:
    """The request model's fields as flags (advisor/cli/flags.py), and --json."""
    from advisor.requests.models import JobRequest

    add_model_flags(p, request or JobRequest)
    p.add_argument("--json", action="store_true", help="print the JSON result")


def _parser() -> argparse.ArgumentParser:
    from advisor.requests.models import EstimateRequest, RecommendRequest

    parser = OneLineParser(prog="advisor", description=(
        "Training-strategy advisor: per-GPU memory, communication, step time and throughput "
        "for DDP, DeepSpeed ZeRO and FSDP, and a recommendation."))
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("recommend", help="rank every strategy at its best settings")
    add_job_flags(rec, RecommendRequest)
    rec.add_argument("--out", help="also write the recommended plan's files into this folder")
    rec.add_argument("--nvme-path", help="absolute directory on a local NVMe drive of every node, "
                     "for a zero3-nvme plan written with --out")
    rec.add_argument("--alternatives", default="0",
                     help="with --out: also write the next N fitting plans (out/alternatives/)")
    est = sub.add_parser("estimate", help="one strategy at the given settings")
    add_job_flags(est, EstimateRequest)
    gpus = sub.add_parser("gpus", help="the GPU catalog")
    gpus.add_argument("--json", action="store_true")
    models = sub.add_parser("models", help="the model presets")
    models.add_argument("--json", action="store_true")
    for module in EXTRA_COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


def request_data(args: argparse.Namespace, request: type | None = None) -> dict:
    """The request fields from parsed job flags (reads --hf-config from disk)."""
    from advisor.requests.models import JobRequest

    return flag_values(args, request or JobRequest)


def _alternatives(text: str) -> int:
    if not text.strip().isdigit() or not 0 <= int(text) <= 16:
        raise InvalidInput("alternatives", f"{text!r} is not a whole number from 0 to 16", "0 to 16")
    return int(text)


def _run(args: argparse.Namespace) -> None:
    if args.command in ("gpus", "models"):
        from advisor.cli import catalog
        catalog.print_catalog(args.command, args.json)
    elif args.command == "estimate":
        _estimate(args)
    else:
        _recommend(args)


def _estimate(args: argparse.Namespace) -> None:
    from advisor.core import schemas
    from advisor.requests.jobs import run_estimate
    from advisor.requests.models import EstimateRequest, validate_request

    result = run_estimate(validate_request(EstimateRequest, request_data(args, EstimateRequest)))
    if args.json:
        print(schemas.to_json(result))
    else:
        from advisor.cli.report import print_estimate
        print_estimate(result)


def _recommend(args: argparse.Namespace) -> None:
    from advisor.core import schemas
    from advisor.emitters.choices import EmitOptions
    from advisor.emitters.files import check_out, summary_line, write_recommendation
    from advisor.requests.jobs import run_recommend
    from advisor.requests.models import RecommendRequest, validate_request

    data = request_data(args, RecommendRequest)
    alternatives = _alternatives(args.alternatives)
    if alternatives and args.out is None:
        raise InvalidInput("alternatives", "needs --out", "--out DIR --alternatives N")
    if args.nvme_path is not None and args.out is None:
        raise InvalidInput("nvme_path", "needs --out (it is written into the plan's files)",
                           "--out DIR --nvme-path /local_nvme")
    request = validate_request(RecommendRequest, data)
    options = None
    if args.out is not None:  # checked before the search, so a bad folder costs nothing
        check_out(args.out)
        options = EmitOptions(nvme_path=args.nvme_path)
    result, _ = run_recommend(request)
    plans = write_recommendation(result, args.out, alternatives, options) if options else []
    if args.json:
        print(schemas.to_json(result))
    else:
        from advisor.cli.report import print_recommendation
        print_recommendation(result)
    if plans:
        print(summary_line(plans[0], args.out), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    parser = _parser()
    try:
        args = parser.parse_args(join_negative_values(sys.argv[1:] if argv is None else argv, parser))
        if hasattr(args, "run"):
            return args.run(args)
        _run(args)
    except AdvisorError as exc:
        print(f"advisor: error: {exc}", file=sys.stderr)
        return 2
    except BrokenPipeError:
        return 0
    return 0


if __name__ == "__main__":
    sys.exit(main())
