"""What `advisor emit` writes, as data: a tree of values, each with the reason the advisor chose
it, and the pieces every engine's config shares (precision, the machine block).

Values are plain Python; advisor/emitters/files.py serialises them with yaml.safe_dump / json.dumps
and puts each reason next to its value (a YAML comment, or a row of PLAN.md for the JSON).
Sources: accelerate 1.15 `commands/config/cluster.py` (the keys `accelerate config` writes) and
`utils/launch.py` (how `accelerate launch` turns them into FSDP_* / ACCELERATE_DEEPSPEED_*
variables); DeepSpeed's config-json reference and `runtime/zero/offload_config.py`.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from advisor.core.errors import InvalidInput
from advisor.core.hardware import gpu_catalog
from advisor.core.results import Estimate
from advisor.core.text import absolute_path

ACCELERATE_PRECISION = {"bf16": "bf16", "fp16": "fp16", "fp32": "no"}


@dataclass(frozen=True, slots=True)
class Choice:
    """One value in an emitted file and why the advisor chose it ("" for boilerplate)."""

    value: Any
    why: str = ""


Tree = dict[str, Any]
"""Nested mapping whose leaves are `Choice`s."""


def plain(tree: Tree) -> dict[str, Any]:
    """The tree without reasons: what the file holds."""
    return {k: plain(v) if isinstance(v, dict) else v.value for k, v in tree.items()}


def reasons(tree: Tree, prefix: str = "") -> list[tuple[str, Any, str]]:
    """(dotted key, value, why) for every value the advisor decided, in file order."""
    out = []
    for key, node in tree.items():
        if isinstance(node, dict):
            out += reasons(node, f"{prefix}{key}.")
        elif node.why:
            out.append((f"{prefix}{key}", node.value, node.why))
    return out


@dataclass(frozen=True, slots=True)
class EmitOptions:
    """What the user adds to an estimate to get runnable files."""

    nvme_path: str | None = None
    """Directory on a local NVMe drive of every node (ZeRO-Infinity)."""
    main_process_port: int = 29500
    """Rendezvous port on node 0 (multi-node)."""

    def __post_init__(self) -> None:
        if self.nvme_path is not None:
            absolute_path(self.nvme_path, "nvme_path")
        if not 1 <= self.main_process_port <= 65535:
            raise InvalidInput("main_process_port", f"{self.main_process_port} is not a TCP port",
                               "1 to 65535")


@dataclass(frozen=True, slots=True)
class Plan:
    """One plan, ready to render: the estimate, both configs and the reasons."""

    estimate: Estimate
    accelerate: Tree
    deepspeed: Tree | None
    """ds_config.json for DeepSpeed strategies, else None."""
    why: list[str]
    """Why this plan (the recommender's summary)."""
    script: list[str] = field(default_factory=list)
    """What the training script must do (DummyOptim, checkpointing code...)."""
    notes: list[str] = field(default_factory=list)
    """How inputs were resolved (inferred shape, default global batch...)."""


def precision_why(est: Estimate) -> str:
    p, gpu = est.workload.precision, est.cluster.gpu
    if p != "fp32" and not est.workload.master_weights:
        return (f"pure {p}: no mixed precision, the model itself is loaded in {p} (no fp32 master "
                "weights or moments, as the estimate assumes)")
    if p == "bf16":
        return f"bf16 mixed precision (fp32 master weights): {gpu} supports it and it needs no loss scaling"
    if p == "fp16":
        lacks = "" if gpu_catalog()[gpu].supports("bf16") else f" ({gpu} has no bf16)"
        return f"fp16 mixed precision with dynamic loss scaling{lacks}"
    return "fp32 training, as asked: no mixed precision"


def accelerate_precision(est: Estimate) -> Choice:
    """Accelerate's mixed_precision key (DDP and FSDP; DeepSpeed takes it from its JSON)."""
    w = est.workload
    return Choice(ACCELERATE_PRECISION[w.precision] if w.master_weights else "no", precision_why(est))


def machines(est: Estimate, options: EmitOptions) -> Tree:
    c = est.cluster
    tree: Tree = {
        "num_machines": Choice(c.nodes, f"{c.nodes} node(s) of {c.gpus_per_node} x {c.gpu}"),
        "num_processes": Choice(c.num_gpus, "one process per GPU, all nodes together"),
        "machine_rank": Choice(0, "launch.sh passes --machine_rank $NODE_RANK on each node"
                               if c.nodes > 1 else ""),
    }
    if c.nodes > 1:
        tree["main_process_ip"] = Choice(None, "node 0's address: launch.sh passes "
                                         "--main_process_ip $MAIN_PROCESS_IP")
        # (no same_network: the launcher's own --same_network default overrides it)
        tree["rdzv_backend"] = Choice("static", "fixed node ranks (NODE_RANK), node 0 hosts the rendezvous")
    tree["main_process_port"] = Choice(options.main_process_port)
    tree["use_cpu"] = Choice(False)
    return tree


def checkpointing_why(act_ckpt: str) -> str:
    return {"full": "full activation checkpointing: the estimate needs it to fit this micro-batch",
            "selective": "selective checkpointing was chosen; Accelerate's switch is full-layer only, "
                         "so advisor_ac.apply does it (plan.json: advisor_ac; PLAN.md)",
            "none": "no activation checkpointing: activations fit without recompute"}[act_ckpt]
