"""The `advisor` command. Thin: flags -> request -> advisor functions -> report or JSON.

Every user error exits 2 with one line naming the field and what is allowed; no traceback.
"""

from __future__ import annotations

import argparse
import importlib
import json
import sys
from pathlib import Path

from advisor.errors import AdvisorError, InvalidInput
from advisor.strategies import STRATEGY_NAMES
from advisor.workload import ACT_CKPTS, OPTIMIZERS, PRECISIONS

# Subcommands that live in their own modules: each has `add_parser(subparsers)` and
# `run(args) -> int`, imports only argparse at module level, and imports heavy code inside run.
EXTRA_COMMANDS: tuple[str, ...] = ("advisor.commands.emit", "advisor.commands.serve",
                                   "advisor.commands.calibrate", "advisor.commands.profiles",
                                   "advisor.commands.validate")


def add_job_flags(p: argparse.ArgumentParser) -> None:
    """Model, cluster and workload flags shared by every command that takes a job."""
    m = p.add_argument_group("model (one of)")
    m.add_argument("--params", help="parameter count, e.g. 13e9 or 7B (shape inferred)")
    m.add_argument("--model", help="preset id (see `advisor models`)")
    m.add_argument("--hf-config", help="path to a local Hugging Face config.json")
    for flag in ("layers", "hidden", "heads", "kv-heads", "ffn", "vocab"):
        m.add_argument(f"--{flag}", type=int)
    m.add_argument("--no-gated-mlp", dest="gated_mlp", action="store_false",
                   help="plain 2-matrix MLP (default: gated SwiGLU)")
    m.add_argument("--tied-embeddings", action="store_true")
    c = p.add_argument_group("cluster")
    c.add_argument("--gpus", required=True, help="8xA100, 2x8xH100, 64xH100, 4xA100-40GB, 8xL40S")
    c.add_argument("--gpus-per-node", type=int)
    c.add_argument("--inter-node-gbps", type=float, help="network per node, Gbit/s")
    c.add_argument("--cpu-ram-gib", type=float, help="host RAM per node, GiB")
    c.add_argument("--nvme-gbps", type=float, help="NVMe bandwidth per node, Gbit/s")
    w = p.add_argument_group("workload")
    w.add_argument("--seq-len", type=int, default=4096)
    w.add_argument("--micro-batch", type=int)
    w.add_argument("--grad-accum", type=int)
    w.add_argument("--global-batch-tokens",
                   help="e.g. 4M (= 2^22 = 4,194,304: K/M/B are binary here); sets grad accumulation")
    w.add_argument("--tokens", help="tokens to train on, e.g. 300B, for time to train")
    w.add_argument("--precision", choices=PRECISIONS, help="default bf16 (fp16 where no bf16)")
    w.add_argument("--optimizer", choices=OPTIMIZERS, default="adamw")
    w.add_argument("--no-master-weights", dest="master_weights", action="store_false",
                   help="pure 16-bit training: no fp32 master weights, gradients or moments "
                   "(a bf16-loaded model without mixed precision; not DeepSpeed)")
    w.add_argument("--act-ckpt", choices=ACT_CKPTS)
    w.add_argument("--no-flash-attention", dest="flash_attention", action="store_false")
    w.add_argument("--compile", action="store_true", help="torch.compile")
    w.add_argument("--sync-each-micro-batch", action=argparse.BooleanOptionalAction,
                   help="reduce gradients every micro-batch, not once per step (Accelerate "
                   "sync_each_batch): with accumulation, FSDP keeps only sharded gradients; "
                   "recommend tries both for FSDP when unset, estimate assumes --no-...")
    w.add_argument("--fused-loss", action="store_true",
                   help="a fused cross-entropy kernel (no fp32 copy of the logits)")
    w.add_argument("--fsdp-version", type=int, choices=(1, 2), default=2)
    c.add_argument("--profile", help="calibration profile name (see `advisor profiles`); 'none' "
                   "for the shipped priors; default: the newest profile of this GPU, if any")
    p.add_argument("--json", action="store_true", help="print the JSON result")


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="advisor", description=(
        "Training-strategy advisor: per-GPU memory, communication, step time and throughput "
        "for DDP, DeepSpeed ZeRO and FSDP, and a recommendation."))
    sub = parser.add_subparsers(dest="command", required=True)
    rec = sub.add_parser("recommend", help="rank every strategy at its best settings")
    add_job_flags(rec)
    rec.add_argument("--strategies", help=f"comma-separated subset of {','.join(STRATEGY_NAMES)}")
    rec.add_argument("--out", help="also write the recommended plan's files into this folder")
    rec.add_argument("--nvme-path", help="directory on a local NVMe drive of every node, for a "
                     "zero3-nvme plan written with --out")
    rec.add_argument("--alternatives", type=int, default=0,
                     help="with --out: also write the next N fitting plans (out/alternatives/)")
    est = sub.add_parser("estimate", help="one strategy at the given settings")
    add_job_flags(est)
    est.add_argument("--strategy", default="fsdp", help=f"one of {', '.join(STRATEGY_NAMES)}")
    gpus = sub.add_parser("gpus", help="the GPU catalog")
    gpus.add_argument("--json", action="store_true")
    models = sub.add_parser("models", help="the model presets")
    models.add_argument("--json", action="store_true")
    for module in EXTRA_COMMANDS:
        importlib.import_module(module).add_parser(sub)
    return parser


_REQUEST_KEYS = ("params", "model", "layers", "hidden", "heads", "kv_heads", "ffn", "vocab",
                 "gated_mlp", "tied_embeddings", "gpus", "gpus_per_node", "inter_node_gbps",
                 "cpu_ram_gib", "nvme_gbps", "seq_len", "micro_batch", "grad_accum",
                 "global_batch_tokens", "tokens", "precision", "optimizer", "master_weights", "act_ckpt",
                 "flash_attention", "compile", "sync_each_micro_batch", "fused_loss",
                 "fsdp_version", "profile")


def request_data(args: argparse.Namespace) -> dict:
    """The request fields from parsed job flags (reads --hf-config from disk)."""
    data = {k: getattr(args, k) for k in _REQUEST_KEYS if getattr(args, k) is not None}
    if args.hf_config:
        path = Path(args.hf_config)
        try:
            data["hf_config"] = json.loads(path.read_text())
        except OSError as exc:
            raise InvalidInput("hf_config", f"cannot read {path}: {exc.strerror}") from None
        except json.JSONDecodeError as exc:
            raise InvalidInput("hf_config",
                               f"{path} is not valid JSON: {exc.msg} at line {exc.lineno}") from None
    return data


def _run(args: argparse.Namespace) -> None:
    from advisor import schemas

    if args.command in ("gpus", "models"):
        from advisor import catalog
        catalog.print_catalog(args.command, args.json)
        return
    from advisor.inputs import EstimateRequest, RecommendRequest, validate_request
    from advisor.jobs import run_estimate, run_recommend

    data = request_data(args)
    if args.command == "estimate":
        data["strategy"] = args.strategy
        result = run_estimate(validate_request(EstimateRequest, data))
        if args.json:
            print(schemas.to_json(result))
        else:
            from advisor.report import print_estimate
            print_estimate(result)
        return
    if args.strategies is not None:
        data["strategies"] = [s.strip() for s in args.strategies.split(",") if s.strip()]
    if args.alternatives and not args.out:
        raise InvalidInput("alternatives", "needs --out", "--out DIR --alternatives N")
    result, model = run_recommend(validate_request(RecommendRequest, data))
    plans = None
    if args.out:
        from advisor.emit import write_recommendation
        from advisor.plan import EmitOptions
        plans = write_recommendation(result, model, args.out, args.alternatives,
                                     EmitOptions(nvme_path=args.nvme_path))
    if args.json:
        print(schemas.to_json(result))
    else:
        from advisor.report import print_recommendation
        print_recommendation(result)
    if plans:
        from advisor.emit import summary_line
        print(summary_line(plans[0], args.out), file=sys.stderr)


def main(argv: list[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    try:
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
