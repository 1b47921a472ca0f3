"""The search space: what the user fixed and what the search may choose, and the batch
arithmetic that ties micro-batch, accumulation and the global batch together."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

from advisor.core.errors import Infeasible, InvalidInput
from advisor.core.workload import ACT_CKPTS, MAX_GRAD_ACCUM, ActCkpt, Workload
from advisor.strategies import STRATEGY_NAMES

MICRO_BATCH_LADDER = (1, 2, 4, 8, 16, 32, 64)


@dataclass(frozen=True, slots=True)
class SearchSpace:
    """What the user fixed and what the search may choose."""

    base: Workload
    """Precision, optimizer, sequence length, flash/compile; micro-batch and ckpt overridden."""
    micro_batches: tuple[int, ...] = MICRO_BATCH_LADDER
    act_ckpts: tuple[ActCkpt, ...] = ACT_CKPTS
    sync_options: tuple[bool, ...] = (False, True)
    """`Workload.sync_each_micro_batch` values tried for FSDP plans with accumulation (it trades
    the unsharded gradient buffer for a reduce-scatter per micro-batch); other plans keep base's."""
    grad_accum: int | None = None
    """Fixed gradient accumulation; None: 1, or derived from global_batch_tokens."""
    global_batch_tokens: int | None = None
    strategies: tuple[str, ...] = STRATEGY_NAMES
    fsdp_version: Literal[1, 2] = 2
    tokens_to_train: float | None = None
    code_changes: bool = True
    """False (--no-code-changes): only plans the config files alone realize (no selective
    checkpointing; the fixes suggest no fused loss)."""


def grad_accum_for(space: SearchSpace, micro_batch: int, dp: int) -> int:
    """Gradient accumulation that gives the requested global batch over `dp` data-parallel
    ranks; raises Infeasible if the global batch is not a multiple of micro_batch x seq_len x dp."""
    if space.global_batch_tokens is None:
        return space.grad_accum or 1
    per_micro = micro_batch * space.base.seq_len * dp
    if space.global_batch_tokens % per_micro:
        raise Infeasible(f"global batch {space.global_batch_tokens} tokens is not a multiple of "
                         f"micro-batch {micro_batch} x {space.base.seq_len} tokens x {dp} GPUs")
    grad_accum = space.global_batch_tokens // per_micro
    if grad_accum > MAX_GRAD_ACCUM:
        raise Infeasible(f"global batch {space.global_batch_tokens} tokens needs {grad_accum} "
                         f"accumulation steps at micro-batch {micro_batch}, over {MAX_GRAD_ACCUM}")
    return grad_accum


def check_global_batch(space: SearchSpace, dp: int) -> None:
    """The global batch must be reachable by at least one micro-batch of the space."""
    if space.global_batch_tokens is None:
        return
    unit = space.base.seq_len * dp
    if space.global_batch_tokens % unit or space.global_batch_tokens < unit:
        raise InvalidInput("global_batch_tokens",
                           f"{space.global_batch_tokens} tokens is not a multiple of seq_len x GPUs"
                           f" = {space.base.seq_len} x {dp} = {unit}",
                           f"a positive multiple of {unit}")
    largest = max(space.micro_batches) * MAX_GRAD_ACCUM * unit
    if space.global_batch_tokens > largest:
        raise InvalidInput("global_batch_tokens",
                           f"{space.global_batch_tokens} tokens needs more than {MAX_GRAD_ACCUM} "
                           "accumulation steps at every micro-batch", f"at most {largest}")
