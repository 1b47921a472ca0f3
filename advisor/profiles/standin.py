"""The device a profile describes, as the advisor's inputs: its GPU (the catalog's, or a stand-in
measured in CPU mode or for a GPU the catalog lacks), the cluster of the calibration, and the
model and workload of the strategy runs. No torch: `advisor validate` imports this.
"""

from __future__ import annotations

from advisor.core.estimate import estimate
from advisor.core.hardware import Cluster, GPUSpec, NodeDefaults, gpu_catalog, parse_cluster, resolve_gpu
from advisor.core.model import ModelSpec
from advisor.core.priors import Priors
from advisor.core.results import Estimate
from advisor.core.units import GiB
from advisor.core.workload import Workload
from advisor.strategies import get_strategy


def catalog_gpu_for(device_name: str, memory_bytes: float) -> str | None:
    """The catalog id of a torch device name ('NVIDIA H100 80GB HBM3' -> H100-80GB), checked
    against its memory (within 10%); None when the catalog has no such GPU."""
    name = device_name.replace("NVIDIA", "").replace("Tesla", "").replace("AMD", "").strip()
    for candidate in (name.replace(" ", "-"), *name.split()):
        try:
            spec, _ = resolve_gpu(candidate)
        except Exception:  # noqa: BLE001 - InvalidInput: try the next spelling
            continue
        if abs(spec.memory_in_GiB * GiB - memory_bytes) <= 0.1 * memory_bytes:
            return spec.name
        for other in gpu_catalog().values():  # same family, the other memory size
            if other.name.startswith(spec.name.split("-")[0]) and \
                    abs(other.memory_in_GiB * GiB - memory_bytes) <= 0.1 * memory_bytes:
                return other.name
    return None


def measured_device_spec(m: dict, fingerprint: dict) -> dict:
    """A GPUSpec-shaped stand-in built only from measurements: peaks are the best rates measured
    here (the datasheet a CPU or an uncatalogued GPU lacks), links the measured bus bandwidths."""
    cpu = fingerprint["device"] == "cpu"
    intra = [c["bus_bytes_per_s"] for c in m["collectives"] if c["tier"] == "intra"]
    inter = [c["bus_bytes_per_s"] for c in m["collectives"] if c["tier"] == "inter"]
    host = min(m["host_device"]["h2d_bytes_per_s"], m["host_device"]["d2h_bytes_per_s"])
    peak = max(g["flops_per_s"] for g in m["gemm"]) / 1e12
    nvme = m.get("nvme") or {}
    return {
        "name": "cpu" if cpu else fingerprint["gpu_name"].replace(" ", "-"),
        "vendor": "cpu" if cpu else "measured", "architecture": "cpu" if cpu else "measured",
        "memory_in_GiB": fingerprint["gpu_memory_bytes"] / GiB,
        "hbm_bandwidth_in_GB_per_sec": m["memory"]["bytes_per_s"] / 1e9,
        "peak_bf16_dense_in_TFLOPS": peak, "peak_fp16_dense_in_TFLOPS": peak,
        "peak_fp32_in_TFLOPS": peak, "peak_fp8_dense_in_TFLOPS": None,
        "intra_node_link": "gloo over host memory" if cpu else "measured",
        "intra_node_bandwidth_in_GB_per_sec": max(intra, default=host) / 1e9,
        "pcie_bandwidth_in_GB_per_sec": host / 1e9,
        "node": {"gpus_per_node": fingerprint["gpus_per_node"],
                 "inter_node_in_Gbit_per_sec": max(inter, default=max(intra, default=host)) * 8 / 1e9,
                 "cpu_ram_in_GiB": m["host_ram_bytes"] / GiB,
                 "nvme_in_Gbit_per_sec": min(nvme.get("read_bytes_per_s", 1e9),
                                             nvme.get("write_bytes_per_s", 1e9)) * 8 / 1e9,
                 "nvme_capacity_in_TiB": 0.0},
        "source": "measured by `python -m calibration run`: peaks are the best rates measured on "
                  "this machine, not a datasheet" + (" (CPU mode, gloo)" if cpu else ""),
    }


def gpu_spec(catalog_gpu: str | None, device_spec: dict | None) -> GPUSpec:
    """The catalog GPU, or the measured stand-in (built without validation: its vendor and
    architecture, 'cpu' or 'measured', are outside the catalog's lists on purpose)."""
    if catalog_gpu is not None:
        return gpu_catalog()[catalog_gpu]
    if device_spec is None:
        raise ValueError("a profile outside the GPU catalog carries its measured device_spec")
    fields = {"aliases": [], "default_for": [], **device_spec}
    return GPUSpec.model_construct(**{**fields, "node": NodeDefaults(**device_spec["node"])})


def profile_cluster(catalog_gpu: str | None, device_spec: dict | None, gpus_per_node: int,
                    nodes: int) -> Cluster:
    if catalog_gpu is not None:
        return parse_cluster(f"{nodes}x{gpus_per_node}x{catalog_gpu}")
    gpu = gpu_spec(None, device_spec)
    node = gpu.node
    return Cluster(gpu=gpu, nodes=nodes, gpus_per_node=gpus_per_node,
                   inter_node_bytes_per_s=node.inter_node_in_Gbit_per_sec * 1e9 / 8,
                   cpu_ram_bytes_per_node=node.cpu_ram_in_GiB * GiB,
                   nvme_bytes_per_s_per_node=node.nvme_in_Gbit_per_sec * 1e9 / 8,
                   nvme_capacity_bytes_per_node=0.0, spec=f"{nodes}x{gpus_per_node}x{gpu.name}")


def run_model_spec(model: dict) -> ModelSpec:
    """The advisor's ModelSpec of a strategy run's TinyLlama (as calibration/tiny_llama.py's
    `model_spec`, without importing torch)."""
    return ModelSpec(name="calibration-run", layers=model["layers"], hidden=model["hidden"],
                     heads=model["heads"], kv_heads=model["kv_heads"], ffn=model["ffn"],
                     vocab=model["vocab"], gated_mlp=True, tied_embeddings=False, norm="rmsnorm",
                     position_embedding="rope", source="calibration/tiny_llama.py")


def run_workload(runs: dict) -> Workload:
    return Workload(seq_len=runs["seq_len"], micro_batch=runs["micro_batch"], grad_accum=1,
                    precision="bf16", optimizer="adamw", act_ckpt="none", flash_attention=True)


def predict(cluster: Cluster, runs: dict, strategy: str, priors: Priors) -> Estimate:
    """The advisor's estimate for one strategy run, on the calibrated cluster."""
    est = estimate(cluster, run_model_spec(runs["model"]), run_workload(runs), get_strategy(strategy), priors)
    if not isinstance(est, Estimate):
        raise ValueError(f"{strategy} cannot run on the calibration cluster: {est.reason}")
    return est
