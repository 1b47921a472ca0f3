"""Hardware: GPU specs (data files), the cluster they form, and cluster-spec parsing.

A GPU preset is `advisor/data/gpus/<name>.toml`; its file name is its id. Keys carry their unit.
`Cluster` is one of the model's three inputs: a pure value, built by `parse_cluster`.
"""

from __future__ import annotations

import re
from functools import cache, lru_cache
from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, Field

from advisor.core.errors import InvalidInput
from advisor.core.units import GiB, TiB, gb_per_s_to_bytes_per_s, gbit_per_s_to_bytes_per_s
from advisor.data import load_presets

Precision = Literal["bf16", "fp16", "fp32", "fp8"]


class NodeDefaults(BaseModel):
    """The typical server built around this GPU, used where the user gives no flag."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    gpus_per_node: int = Field(gt=0)
    """GPUs in one server (8 for HGX/DGX boards)."""
    inter_node_in_Gbit_per_sec: float = Field(gt=0)
    """Network bandwidth per node, all NICs together, one direction (e.g. 8 x 200 Gb/s IB = 1600)."""
    cpu_ram_in_GiB: float = Field(gt=0)
    """Host memory per node."""
    nvme_in_Gbit_per_sec: float = Field(gt=0)
    """Local NVMe bandwidth per node (RAID of all drives), one direction."""
    nvme_capacity_in_TiB: float = Field(ge=0)
    """Local NVMe capacity per node."""


class GPUSpec(BaseModel):
    """One GPU model from the catalog. Peaks are dense (no sparsity) datasheet numbers."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    name: str
    """Catalog id; equals the file name."""
    aliases: list[str] = []
    """Other spellings that mean exactly this GPU."""
    default_for: list[str] = []
    """Ambiguous short names that resolve to this GPU (e.g. `A100`); the output says so."""
    vendor: Literal["NVIDIA", "AMD"]
    architecture: Literal["volta", "turing", "ampere", "ada", "hopper", "blackwell", "cdna3", "cdna4"]
    """Keys the efficiency priors in `advisor/data/priors.toml`."""
    memory_in_GiB: float = Field(gt=0)
    """Device memory as the driver reports it (an "80 GB" A100 has 80 GiB)."""
    hbm_bandwidth_in_GB_per_sec: float = Field(gt=0)
    peak_bf16_dense_in_TFLOPS: float | None = Field(default=None, gt=0)
    """None where the GPU has no bf16 tensor cores (V100)."""
    peak_fp16_dense_in_TFLOPS: float = Field(gt=0)
    peak_fp32_in_TFLOPS: float = Field(gt=0)
    """Non-tensor fp32 (what fp32 training gets without TF32)."""
    peak_fp8_dense_in_TFLOPS: float | None = Field(default=None, gt=0)
    """None where the GPU has no fp8 tensor cores."""
    intra_node_link: str
    """NVLink generation, Infinity Fabric or PCIe (no peer link)."""
    intra_node_bandwidth_in_GB_per_sec: float = Field(gt=0)
    """Per GPU, one direction, to the other GPUs of the node (NVLink total / 2, or PCIe)."""
    pcie_bandwidth_in_GB_per_sec: float = Field(gt=0)
    """Host <-> device, one direction, datasheet (x16 link)."""
    node: NodeDefaults
    source: str
    """Where the numbers come from."""

    def peak_flops(self, precision: Precision) -> float:
        """Dense peak FLOP/s for the compute precision. Raises InvalidInput where unsupported."""
        tflops = {
            "bf16": self.peak_bf16_dense_in_TFLOPS,
            "fp16": self.peak_fp16_dense_in_TFLOPS,
            "fp32": self.peak_fp32_in_TFLOPS,
            "fp8": self.peak_fp8_dense_in_TFLOPS,
        }[precision]
        if tflops is None:
            supported = [p for p in ("bf16", "fp16", "fp32", "fp8") if self.supports(p)]
            raise InvalidInput("precision", f"{self.name} has no {precision} tensor cores",
                               ", ".join(supported))
        return tflops * 1e12

    def supports(self, precision: Precision) -> bool:
        if precision == "bf16":
            return self.peak_bf16_dense_in_TFLOPS is not None
        if precision == "fp8":
            return self.peak_fp8_dense_in_TFLOPS is not None
        return True


class Cluster(BaseModel):
    """The cluster: one GPU type, `nodes` x `gpus_per_node`, and the links between them."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    gpu: GPUSpec
    nodes: int = Field(gt=0)
    gpus_per_node: int = Field(gt=0)
    inter_node_bytes_per_s: float = Field(gt=0)
    """Network bandwidth per node, one direction."""
    cpu_ram_bytes_per_node: float = Field(gt=0)
    nvme_bytes_per_s_per_node: float = Field(gt=0)
    nvme_capacity_bytes_per_node: float = Field(ge=0)
    spec: str
    """What the user typed, e.g. `2x8xH100`."""
    assumed: tuple[str, ...] = ()
    """ClusterOverrides fields the user left unset: the GPU's typical server supplied them."""
    notes: tuple[str, ...] = ()
    """How an ambiguous name or default was resolved, shown to the user."""

    def with_note(self, note: str) -> Cluster:
        """This cluster with one more note (Cluster is frozen: a new one)."""
        return self.model_copy(update={"notes": (*self.notes, note)})

    @property
    def num_gpus(self) -> int:
        return self.nodes * self.gpus_per_node

    @property
    def gpu_memory_bytes(self) -> float:
        return self.gpu.memory_in_GiB * GiB

    @property
    def intra_node_bytes_per_s(self) -> float:
        return gb_per_s_to_bytes_per_s(self.gpu.intra_node_bandwidth_in_GB_per_sec)

    @property
    def pcie_bytes_per_s(self) -> float:
        return gb_per_s_to_bytes_per_s(self.gpu.pcie_bandwidth_in_GB_per_sec)

    @property
    def hbm_bytes_per_s(self) -> float:
        return gb_per_s_to_bytes_per_s(self.gpu.hbm_bandwidth_in_GB_per_sec)

    def with_nodes(self, nodes: int) -> Cluster:
        """The same cluster with another node count (used to find the cheapest fix)."""
        spec = f"{nodes}x{self.gpus_per_node}x{self.gpu.name}"
        return self.model_copy(update={"nodes": nodes, "spec": spec})


@cache
def gpu_catalog() -> dict[str, GPUSpec]:
    """All GPU presets by id, read from `advisor/data/gpus/*.toml` on first use."""
    return load_presets("gpus", GPUSpec)


def resolve_gpu(name: str) -> tuple[GPUSpec, str | None]:
    """Find a GPU by id, alias or ambiguous short name (case-insensitive).

    Returns the spec and, for an ambiguous short name, a note saying which GPU it resolved to.
    """
    key = name.strip().lower()
    catalog = gpu_catalog()
    for spec in catalog.values():
        if key == spec.name.lower() or key in (a.lower() for a in spec.aliases):
            return spec, None
    for spec in catalog.values():
        if key in (a.lower() for a in spec.default_for):
            others = [s.name for s in catalog.values()
                      if s.name != spec.name and s.name.lower().startswith(key)]
            return spec, (f"'{name}' resolved to {spec.name}"
                          + (f" (pass {' or '.join(others)} for the other{'s' if len(others) > 1 else ''})"
                       if others else ""))
    raise InvalidInput("gpus", f"unknown GPU {name!r}", ", ".join(sorted(catalog)))


_SPEC_RE = re.compile(r"^\s*(?:(\d+)\s*[xX*]\s*)?(?:(\d+)\s*[xX*]\s*)?([A-Za-z][A-Za-z0-9.\-_]*)\s*$")


_CLUSTER: dict[str, Any] = {"x-group": "cluster"}  # where the CLI and the form show the field


class ClusterOverrides(BaseModel):
    """Optional flags that override the GPU's typical node (also fields of every request)."""

    model_config = ConfigDict(extra="forbid", frozen=True, use_attribute_docstrings=True)

    gpus_per_node: int | None = Field(default=None, gt=0, le=72, json_schema_extra=_CLUSTER)
    """GPUs per node (default: the GPU's typical server; an NVL72 rack is one node of 72)."""
    inter_node_gbps: float | None = Field(default=None, ge=0.1, le=1e5, json_schema_extra=_CLUSTER)
    """Network bandwidth per node, Gbit/s."""
    cpu_ram_gib: float | None = Field(default=None, ge=1, le=1e5, json_schema_extra=_CLUSTER)
    """Host RAM per node, GiB."""
    nvme_gbps: float | None = Field(default=None, ge=0.1, le=1e5, json_schema_extra=_CLUSTER)
    """NVMe bandwidth per node, Gbit/s."""
    nvme_tib: float | None = Field(default=None, ge=0.01, le=1e4, json_schema_extra=_CLUSTER)
    """NVMe capacity per node, TiB (ZeRO-Infinity swap space)."""


MAX_GPUS = 65536


@lru_cache(maxsize=256)
def parse_cluster(spec: str, overrides: ClusterOverrides | None = None) -> Cluster:
    """Parse `8xA100`, `2x8xH100`, `64xH100`, `4xA100-40GB`, `8xL40S` or a bare `H100`.

    `NxGPU` with N above the node size means N GPUs in nodes of `gpus_per_node` (the flag, else
    the GPU's typical node, 8 for HGX boards); `MxNxGPU` means M nodes of N. Cached: a Cluster is
    immutable (add notes with `with_note`, which returns a new one).
    """
    overrides = overrides or ClusterOverrides()
    match = _SPEC_RE.match(spec or "")
    if not match:
        raise InvalidInput("gpus", f"cannot read cluster spec {spec!r}",
                           "COUNTxGPU or NODESxPER_NODExGPU, e.g. 8xA100, 2x8xH100, 4xA100-40GB")
    first, second, gpu_name = match.groups()
    gpu, note = resolve_gpu(gpu_name)
    per_node_default = overrides.gpus_per_node or gpu.node.gpus_per_node
    if second is not None:
        nodes, per_node = int(first), int(second)
        if overrides.gpus_per_node and overrides.gpus_per_node != per_node:
            raise InvalidInput("gpus_per_node", f"conflicts with {spec!r} ({per_node} per node)",
                               str(per_node))
    else:
        count = int(first) if first is not None else 1
        if count <= per_node_default:
            nodes, per_node = 1, count
        elif count % per_node_default:
            raise InvalidInput("gpus", f"{count} GPUs do not fill nodes of {per_node_default}",
                               f"a multiple of {per_node_default}, or pass --gpus-per-node")
        else:
            nodes, per_node = count // per_node_default, per_node_default
    if nodes < 1 or per_node < 1 or nodes * per_node > MAX_GPUS:
        raise InvalidInput("gpus", f"{nodes} x {per_node} GPUs is out of range", f"1 to {MAX_GPUS} GPUs")
    node = gpu.node
    notes = (note,) if note else ()
    return Cluster(
        gpu=gpu,
        nodes=nodes,
        gpus_per_node=per_node,
        inter_node_bytes_per_s=gbit_per_s_to_bytes_per_s(
            overrides.inter_node_gbps or node.inter_node_in_Gbit_per_sec),
        cpu_ram_bytes_per_node=(overrides.cpu_ram_gib or node.cpu_ram_in_GiB) * GiB,
        nvme_bytes_per_s_per_node=gbit_per_s_to_bytes_per_s(
            overrides.nvme_gbps or node.nvme_in_Gbit_per_sec),
        nvme_capacity_bytes_per_node=(overrides.nvme_tib or node.nvme_capacity_in_TiB) * TiB,
        spec=spec.strip(),
        assumed=tuple(k for k, v in overrides.model_dump().items() if v is None),
        notes=notes,
    )
