"""`python -m calibration run|measure`, launched by torchrun on every node.

    torchrun --nproc-per-node 8 -m calibration run --out profile.json [--quick] [--name NAME]
    torchrun --nnodes 2 --nproc-per-node 8 --rdzv-endpoint HOST:PORT -m calibration run
    torchrun --nproc-per-node 2 -m calibration measure --strategies ddp,fsdp --out runs.json

`run`: probes (calibration/probes.py), strategy runs (strategy_runs.py), fit (fit.py); rank 0
writes the profile to --out and to the profile store ($ADVISOR_HOME), prints a summary against
the catalog's datasheet. `measure`: the strategy runs only, for `advisor validate`.
Without CUDA it runs on the CPU with gloo at tiny sizes, and says so.
"""

from __future__ import annotations

import argparse
import json
import logging
import os
import platform
import secrets
import shutil
import subprocess
import sys
import time
import warnings
from datetime import UTC, datetime
from pathlib import Path

import torch
import torch.distributed as dist

from advisor.profiles.validation import runnable_strategies
from calibration import probes
from calibration.strategy_runs import RunConfig, run_all
from calibration.tiny_llama import TinyLlamaConfig

GPU_MODEL = {"hidden": 2048, "heads": 16, "kv_heads": 8, "ffn": 5632, "vocab": 32000}
"""Default GPU run shape (Llama-style, ~1B-class layer), when neither --model nor shape flags."""


class Progress:
    """Rank 0 prints each step: stage, detail, elapsed time and an estimate of the time left.
    Stage weights are rough relative costs; the estimate scales the time so far by the weight
    still to do."""

    def __init__(self, weights: dict[str, float]):
        self.weights, self.start = weights, time.perf_counter()
        self.finished: list[str] = []

    def __call__(self, stage: str, detail: str = "", fraction: float = 0.0) -> None:
        """`fraction`: how much of `stage` is done (stages passed before count as done)."""
        if stage not in self.finished:
            self.finished.append(stage)
        if dist.get_rank():
            return
        total = sum(self.weights.values())
        done = sum(self.weights.get(s, 0.0) for s in self.finished[:-1])
        done += fraction * self.weights.get(stage, 0.0)
        elapsed = time.perf_counter() - self.start
        eta = f"~{elapsed * (total - done) / done:.0f} s left" if done else "estimating"
        print(f"[{100 * done / total:3.0f}%] {stage}{': ' + detail if detail else ''}"
              f"  ({elapsed:.0f} s, {eta})", flush=True)


def _non_torch_bytes(device: torch.device) -> int:
    """Device memory in use that torch's allocator did not reserve (CUDA context, cuBLAS
    workspace, NCCL buffers), this process alone on its GPU."""
    free, total = torch.cuda.mem_get_info(device)
    return total - free - torch.cuda.memory_reserved(device)


def _setup() -> tuple[torch.device, int | None]:
    """(device, CUDA context bytes measured before NCCL exists, or None in CPU mode)."""
    warnings.filterwarnings("ignore", category=FutureWarning)
    logging.getLogger("DeepSpeed").setLevel(logging.WARNING)
    if torch.cuda.is_available():
        device = torch.device("cuda", int(os.environ.get("LOCAL_RANK", 0)))
        torch.cuda.set_device(device)
        torch.ones(256, 256, device=device) @ torch.ones(256, 256, device=device)  # cuBLAS up
        torch.cuda.synchronize(device)
        context = _non_torch_bytes(device)
        dist.init_process_group("nccl", device_id=device)
        return device, context
    else:
        device = torch.device("cpu")
        os.environ.setdefault("DS_ACCELERATOR", "cpu")  # DeepSpeed: no accelerator probing
        dist.init_process_group("gloo")
    return device, None


def _host_ram() -> int:
    return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")


def _cpu_name() -> str:
    try:
        for line in Path("/proc/cpuinfo").read_text().splitlines():
            if line.startswith("model name"):
                return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine()


def fingerprint(device: torch.device) -> dict:
    local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    fp = {"device": device.type, "gpus_per_node": local, "nodes": dist.get_world_size() // local,
          "torch": torch.__version__, "driver": None, "cuda": None, "nccl": None}
    if device.type == "cpu":
        return fp | {"gpu_name": f"cpu: {_cpu_name()}", "gpu_memory_bytes": _host_ram()}
    driver = None
    if shutil.which("nvidia-smi"):
        out = subprocess.run(["nvidia-smi", "--query-gpu=driver_version", "--format=csv,noheader"],
                             capture_output=True, text=True, timeout=30).stdout.split()
        driver = out[0] if out else None
    nccl = torch.cuda.nccl.version() if torch.version.cuda else None
    return fp | {"gpu_name": torch.cuda.get_device_name(device),
                 "gpu_memory_bytes": torch.cuda.get_device_properties(device).total_memory,
                 "driver": driver, "cuda": torch.version.cuda or torch.version.hip,
                 "nccl": ".".join(map(str, nccl)) if isinstance(nccl, tuple) else nccl and str(nccl)}


def run_config(args: argparse.Namespace, device: torch.device) -> RunConfig:
    cpu = device.type == "cpu"
    shape = {}
    if args.model:
        from advisor.core.model import preset

        spec = preset(args.model)
        shape = {k: getattr(spec, k) for k in ("hidden", "heads", "kv_heads", "ffn", "vocab")}
    elif not cpu:
        shape = dict(GPU_MODEL)
    shape |= {k: getattr(args, k) for k in ("hidden", "heads", "kv_heads", "ffn", "vocab")
              if getattr(args, k) is not None}
    layers = args.layers or (3 if cpu else 2 if args.quick or args.command == "measure" else 4)
    return RunConfig(model=TinyLlamaConfig(layers=layers, **shape),
                     micro_batch=args.micro_batch or 2,
                     seq_len=args.seq_len or (32 if cpu else 1024 if args.quick else 2048),
                     steps=args.steps or (3 if args.quick or cpu else 10))


def _gather(obj: dict) -> list[dict]:
    out: list[dict] = [{}] * dist.get_world_size()
    dist.all_gather_object(out, obj)
    return out


def measure_probes(args: argparse.Namespace, device: torch.device, context: int | None,
                   cfg: RunConfig, progress: Progress) -> dict:
    """Every probe on every rank at once (as training runs); rank 0's device numbers, the node's
    summed CPU-Adam rate, the slowest rank's collectives."""
    b = probes.budget(device, args.quick)
    m: dict = {"device_memory": None, "host_ram_bytes": _host_ram()}
    if device.type == "cuda":
        dist.all_reduce(torch.ones(1, device=device))  # NCCL's communicator and buffers exist now
        torch.cuda.synchronize(device)
        mem = _gather({"context": context, "nccl": _non_torch_bytes(device) - context})
        m["device_memory"] = {"context_bytes": max(r["context"] for r in mem),
                              "nccl_bytes": max(r["nccl"] for r in mem), "ranks": len(mem)}
    h = cfg.model.hidden
    layers = [probes.default_layer(x) for x in b.hidden_sizes]
    layers.append((h, cfg.model.kv_heads * cfg.model.head_dim, cfg.model.ffn))
    progress("gemm", f"layer matmuls at hidden {sorted({x[0] for x in layers})}")
    m["gemm"] = probes.gemm(layers, device, torch.bfloat16, b)
    progress("attention", f"SDPA at hidden {h}, sequence {cfg.seq_len}")
    m["attention"] = probes.attention(h, device, torch.bfloat16, b, cfg.seq_len)
    progress("memory", f"copy of {b.copy_bytes / probes.MiB:g} MiB")
    m["memory"] = probes.memory_bandwidth(device, b)
    m["collectives"] = _collectives(device, b, progress)
    progress("host<->device", "pinned copies" if device.type == "cuda" else "host memcpy (CPU mode)")
    m["host_device"] = probes.host_device(device, b)
    progress("cpu adam", f"{b.adam_params / 1e6:g}M params per rank")
    adam = _gather(probes.cpu_adam(b, try_deepspeed=args.ds_cpu_adam))
    local = [a for a in adam[: int(os.environ.get("LOCAL_WORLD_SIZE", len(adam)))]]
    rates = {"torch": sum(a["params_per_s"] for a in local if a["kind"].startswith("torch")),
             "deepspeed": sum(a["params_per_s"] for a in local if a["kind"] == "deepspeed")}
    m["cpu_adam"] = {"kind": local[0]["kind"], "ranks_per_node": len(local), "per_rank": adam,
                     "torch_params_per_s_per_node": rates["torch"] or None,
                     "deepspeed_params_per_s_per_node": rates["deepspeed"] or None,
                     "spread": max(a["spread"] for a in local)}
    if rates["torch"] == 0:  # DeepSpeed's op loaded: time torch's too, for FSDP CPU offload
        m["cpu_adam"]["torch_params_per_s_per_node"] = len(local) * probes.cpu_adam(b, False)["params_per_s"]
    m["nvme"] = None
    if args.nvme_path:
        progress("nvme", f"{b.nvme_bytes / probes.MiB:g} MiB in {args.nvme_path}")
        m["nvme"] = _gather(probes.nvme(args.nvme_path, b))[0]
    return m


def _collectives(device: torch.device, b: probes.Budget, progress: Progress) -> list[dict]:
    local = int(os.environ.get("LOCAL_WORLD_SIZE", dist.get_world_size()))
    nodes = dist.get_world_size() // local
    intra = dist.new_subgroups(local)[0] if nodes > 1 else None
    heads = dist.new_group([n * local for n in range(nodes)]) if nodes > 1 else None
    out = probes.collectives(device, b, intra, "intra", lambda d: progress("collectives", d))
    if nodes > 1 and dist.get_rank() % local == 0:
        out += probes.collectives(device, b, heads, "inter", lambda d: progress("collectives", d))
    return _gather({"rows": out})[0]["rows"]


def main(argv: list[str] | None = None) -> None:
    args = _parser().parse_args(argv)
    device, context = _setup()
    cfg = run_config(args, device)
    strategies = ([s.strip() for s in args.strategies.split(",")] if args.strategies
                  else list(runnable_strategies()))
    weights = {"gemm": 2, "attention": 1, "memory": 1, "collectives": 3, "host<->device": 1,
               "cpu adam": 2, "nvme": 1, "strategy runs": 2 * len(strategies) + 1, "fit": 1}
    progress = Progress(weights if args.command == "run" else {"strategy runs": 1})
    if dist.get_rank() == 0 and device.type == "cpu":
        print("No CUDA device: CPU mode (gloo, tiny sizes). The result describes this CPU, "
              "not a GPU, and is for testing the pipeline.", flush=True)
    fp = fingerprint(device)
    m = measure_probes(args, device, context, cfg, progress) if args.command == "run" else {}
    m["runs"] = run_all(strategies, cfg, device,
                        lambda name, i, n: progress("strategy runs", f"{name} ({i + 1}/{n})", i / n))
    if dist.get_rank() == 0:
        finish(args, fp, m, progress)
    dist.barrier()
    dist.destroy_process_group()
    # Skip interpreter teardown: gloo's threads can abort a process that tears down with them
    # alive ("terminate called without an active exception"), failing a finished run.
    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(0)


def _parser() -> argparse.ArgumentParser:
    p = argparse.ArgumentParser(prog="python -m calibration")
    p.add_argument("command", choices=("run", "measure"))
    p.add_argument("--out", help="write the profile (run) or the runs (measure) as JSON here")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats (about a minute)")
    p.add_argument("--name", help="profile name (default: <gpu>-<nodes>x<gpus>-<date>-<random>)")
    p.add_argument("--no-store", action="store_true", help="do not save into $ADVISOR_HOME")
    p.add_argument("--nvme-path", help="directory on the NVMe to benchmark (offload to NVMe)")
    p.add_argument("--ds-cpu-adam", action="store_true",
                   help="also time DeepSpeed's CPU Adam (may JIT-build its C++ op once: minutes)")
    p.add_argument("--strategies", help="comma-separated subset of the runnable strategies (default: all of "
                   "advisor.profiles.validation.runnable_strategies())")
    p.add_argument("--model", help="advisor model preset whose layer shape the runs use")
    for flag in ("hidden", "heads", "kv-heads", "ffn", "vocab", "layers", "seq-len", "micro-batch",
                 "steps"):
        p.add_argument(f"--{flag}", type=int)
    p.add_argument("--invoked-as", default=None, help=argparse.SUPPRESS)
    return p


def finish(args: argparse.Namespace, fp: dict, m: dict, progress: Progress) -> None:
    """Rank 0: write the runs (measure), or fit, print the summary, write and store the profile."""
    from advisor.profiles import fit
    from advisor.profiles import standin as device
    from advisor.profiles import validation as validate
    from advisor.profiles.schema import Fingerprint, Profile, missing_terms, seal
    from advisor.profiles.store import store_path, write_atomic
    from advisor.profiles.use import save_profile

    if args.command == "measure":
        text = json.dumps({"fingerprint": fp, "runs": m["runs"]}, indent=1)
        write_atomic(Path(args.out), text) if args.out else print(text)
        return
    progress("fit", "efficiency, bandwidth, overhead and overlap terms")
    cuda = fp["device"] == "cuda"
    catalog = device.catalog_gpu_for(fp["gpu_name"], fp["gpu_memory_bytes"]) if cuda else None
    name = args.name or default_name(fp, catalog)
    overrides, terms, spec = fit.fit_profile(m, fp, catalog, name)
    notes = []
    if fp["device"] == "cpu":
        notes.append("CPU mode (gloo, tiny sizes): describes this CPU, never matched to a GPU")
    elif catalog is None:
        notes.append(f"{fp['gpu_name']} is not in the GPU catalog: efficiencies are relative to the "
                     "best rates measured here")
    local = fp["gpus_per_node"]
    profile = seal(Profile(
        name=name, created_at=datetime.now(UTC).isoformat(timespec="seconds"),
        fingerprint=Fingerprint(**fp), catalog_gpu=catalog, device_spec=spec, quick=args.quick,
        command=args.invoked_as or f"torchrun --nnodes {fp['nodes']} --nproc-per-node {local} "
                                   f"-m calibration {' '.join(sys.argv[1:])}",
        overrides=overrides, fit=terms, measurements=m, notes=notes))
    if args.out:
        write_atomic(Path(args.out), profile.model_dump_json(indent=1))
    print(validate.measured_summary(profile), flush=True)
    missing = missing_terms(profile)
    if missing:
        print(f"not fitted (shipped priors stay): {', '.join(missing)}")
    where = f"written to {args.out}" if args.out else ""
    if not args.no_store:
        version = save_profile(profile)
        where = ", ".join(filter(None, [where, f"stored in {store_path()} (version {version})"]))
    print(f"profile '{name}' {where or 'kept nowhere (--no-store without --out)'}", flush=True)


def default_name(fp: dict, catalog_gpu: str | None) -> str:
    stamp = datetime.now(UTC).strftime("%Y%m%d-%H%M%S")
    return f"{(catalog_gpu or fp['device']).lower()}-{fp['nodes']}x{fp['gpus_per_node']}-{stamp}-" \
           f"{secrets.token_hex(2)}"


if __name__ == "__main__":
    main()
