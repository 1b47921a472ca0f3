"""`advisor emit`: ready-to-run files for one strategy (accelerate_config.yaml, ds_config.json,
launch.sh, PLAN.md), at the best micro-batch and checkpointing the search finds for it."""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    from advisor.cli.main import add_job_flags
    from advisor.strategies import STRATEGY_NAMES

    p = subparsers.add_parser("emit", help="write the config files, launch script and plan for one strategy")
    add_job_flags(p)
    p.add_argument("--strategy", required=True, help=f"one of {', '.join(STRATEGY_NAMES)}")
    p.add_argument("--out", required=True, help="folder to write (created; replaced if advisor wrote it)")
    p.add_argument("--nvme-path", help="directory on a local NVMe drive of every node (zero3-nvme)")
    p.set_defaults(run=run)


def run(args: argparse.Namespace) -> int:
    import sys

    from advisor.cli.main import request_data
    from advisor.emitters.choices import EmitOptions
    from advisor.emitters.files import emit_strategy

    plans = emit_strategy(request_data(args), args.strategy, args.out,
                          EmitOptions(nvme_path=args.nvme_path))
    if args.json:
        from advisor.core import schemas
        print(schemas.to_json(plans[0].estimate))
    else:
        from advisor.emitters.files import summary_line
        print(summary_line(plans[0], args.out), file=sys.stdout)
    return 0
