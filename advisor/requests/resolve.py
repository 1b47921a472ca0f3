"""A request resolved into the cost model's inputs: the cluster, the model, the workload (or
the search space) and the priors (shipped, or a calibration profile's)."""

from __future__ import annotations

from pydantic import ValidationError

from advisor.core import activations
from advisor.core.errors import Infeasible, InvalidInput
from advisor.core.hardware import Cluster, ClusterOverrides, parse_cluster
from advisor.core.hf_config import from_hf_config
from advisor.core.model import ModelSpec, infer_from_params, preset
from advisor.core.priors import Priors
from advisor.core.workload import ACT_CKPTS, Workload, WorkloadOptions
from advisor.profiles.use import priors_for
from advisor.requests.models import EstimateRequest, JobRequest
from advisor.search.space import MICRO_BATCH_LADDER, SearchSpace, check_global_batch, grad_accum_for
from advisor.strategies import STRATEGY_NAMES, get_strategy


def resolve_model(req: JobRequest) -> ModelSpec:
    shape = {k: getattr(req, k) for k in ("layers", "hidden", "heads", "kv_heads", "ffn", "vocab")}
    given = [name for name, present in (("params", req.params is not None), ("model", req.model),
                                        ("hf_config", req.hf_config is not None),
                                        ("layers", any(v is not None for v in shape.values())))
             if present]
    if len(given) != 1:
        raise InvalidInput("model", "give the model exactly one way" + (
            f", not {' and '.join(given)}" if given else ""), "--params, --model, --hf-config, "
            "or the shape flags --layers --hidden --heads --ffn --vocab [--kv-heads]")
    if req.model is not None:
        spec = preset(req.model)
    elif req.hf_config is not None:
        spec = from_hf_config(req.hf_config, source="hf_config")
    elif "layers" in given:
        missing = [k for k, v in shape.items() if v is None and k != "kv_heads"]
        if missing:
            raise InvalidInput(missing[0], "required with the shape flags",
                               "--layers --hidden --heads --ffn --vocab")
        try:
            spec = ModelSpec(name="custom", **{**shape, "kv_heads": shape["kv_heads"] or shape["heads"]},
                             gated_mlp=req.gated_mlp, tied_embeddings=req.tied_embeddings,
                             source="shape flags")
        except ValidationError as exc:
            raise InvalidInput("heads", exc.errors()[0]["msg"].replace("Value error, ", ""),
                               "heads dividing hidden, kv_heads dividing heads") from None
    elif req.params is not None:
        spec = infer_from_params(req.params)
    return spec


def resolve_priors(req: JobRequest, cluster: Cluster) -> tuple[Priors, Cluster]:
    """The shipped priors, or a calibration profile's (named, or matched to the cluster's GPU),
    and the cluster with a note saying which profile was used."""
    priors, note = priors_for(req.profile, cluster.gpu.name, cluster.gpus_per_node, cluster.nodes)
    return priors, (cluster.with_note(note) if note else cluster)


def resolve_cluster(req: JobRequest) -> Cluster:
    return parse_cluster(req.gpus, ClusterOverrides.model_validate(
        req.model_dump(include=set(ClusterOverrides.model_fields))))


def base_workload(req: JobRequest, cluster: Cluster, model: ModelSpec) -> tuple[Workload, Cluster]:
    """The workload with precision resolved (bf16 where supported, else fp16), and the cluster
    with a note when the default fell back to fp16."""
    precision = req.precision or ("bf16" if cluster.gpu.supports("bf16") else "fp16")
    if req.precision is None and precision == "fp16":
        cluster = cluster.with_note(f"{cluster.gpu.name} has no bf16: using fp16 mixed precision")
    if not cluster.gpu.supports(precision):
        cluster.gpu.peak_flops(precision)  # raises InvalidInput naming the supported ones
    if model.position_embedding == "learned" and req.seq_len > model.max_position_embeddings:
        raise InvalidInput("seq_len", f"{model.name} has learned positions up to "
                           f"{model.max_position_embeddings}", f"1 to {model.max_position_embeddings}")
    workload = Workload.model_validate({
        **req.model_dump(include=set(WorkloadOptions.model_fields)),
        # what the search chooses, at estimate's defaults when unset
        "micro_batch": req.micro_batch or 1, "grad_accum": req.grad_accum or 1, "precision": precision,
        "act_ckpt": req.act_ckpt or "none", "sync_each_micro_batch": bool(req.sync_each_micro_batch)})
    activations.check_modelled(model, workload)  # refuses what the activation model does not describe
    return workload, cluster


def resolve_estimate(req: EstimateRequest) -> tuple[Cluster, ModelSpec, Workload]:
    cluster, model = resolve_cluster(req), resolve_model(req)
    workload, cluster = base_workload(req, cluster, model)
    if req.global_batch_tokens is not None:
        space = search_space(req, workload)
        dp = get_strategy(req.strategy, req.fsdp).layout(cluster).dp
        ga = _grad_accum(space, workload.micro_batch, dp)
        workload = workload.model_copy(update={"grad_accum": ga})
    return cluster, model, workload


def _grad_accum(space: SearchSpace, micro_batch: int, dp: int) -> int:
    check_global_batch(space, dp)
    try:
        return grad_accum_for(space, micro_batch, dp)
    except Infeasible as exc:
        raise InvalidInput("global_batch_tokens", exc.reason,
                           "a multiple of micro_batch x seq_len x GPUs") from None


def search_space(req: JobRequest, workload: Workload) -> SearchSpace:
    if req.grad_accum is not None and req.global_batch_tokens is not None:
        raise InvalidInput("grad_accum", "give --grad-accum or --global-batch-tokens, not both")
    if req.global_batch_tokens is not None and req.global_batch_tokens != int(req.global_batch_tokens):
        raise InvalidInput("global_batch_tokens", f"{req.global_batch_tokens} is not a whole number "
                           "of tokens", "a positive integer, e.g. 4194304 or 4M")
    strategies = tuple(getattr(req, "strategies", None) or STRATEGY_NAMES)
    return SearchSpace(
        base=workload,
        micro_batches=(req.micro_batch,) if req.micro_batch else MICRO_BATCH_LADDER,
        act_ckpts=(req.act_ckpt,) if req.act_ckpt else tuple(
            c for c in ACT_CKPTS if getattr(req, "code_changes", True) or c != "selective"),
        code_changes=getattr(req, "code_changes", True),
        sync_options=((req.sync_each_micro_batch,) if req.sync_each_micro_batch is not None
                      else (False, True)),
        grad_accum=req.grad_accum,
        global_batch_tokens=int(req.global_batch_tokens) if req.global_batch_tokens else None,
        strategies=strategies, fsdp_version=req.fsdp, tokens_to_train=req.tokens)
