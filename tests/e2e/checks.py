"""Read emitted files with Accelerate's and DeepSpeed's own code, the way their launchers do.

Used by tests/test_emit_parsers.py (every strategy x cluster) and by the FSDP2 end-to-end script.

- `launcher_env`: `accelerate launch --config_file <yaml>` up to the point where it starts the
  processes: its argument parser, `_validate_launch_command` (which loads the YAML with
  `load_config_from_file`) and `prepare_deepspeed_cmd_env` / `prepare_multi_gpu_env`, giving the
  environment every process gets.
- `build_plugins`: the plugin objects each process builds from that environment
  (FullyShardedDataParallelPlugin, DeepSpeedPlugin + set_mixed_precision, ParallelismConfig).
  `load_config_from_file` checks top-level keys only and the launcher silently drops unknown keys
  inside fsdp_config / deepspeed_config, so `unknown_section_keys` checks those against the
  launcher's own argument names.
- `check_ds_config`: DeepSpeed's `DeepSpeedConfig` (its pydantic models for every section, batch
  arithmetic) at the target world size, plus the top-level keys, which DeepSpeedConfig does not
  check, against DeepSpeed's own constants.

Device type is the one thing adapted here: this machine has no GPU, so where a plugin asks for
the current CUDA device (FSDP1 sync_module_states) the check answers "cuda:0".
"""

from __future__ import annotations

import argparse
import json
import os
from pathlib import Path
from types import SimpleNamespace
from unittest import mock


def _launch_parser() -> argparse.ArgumentParser:
    from accelerate.commands.launch import launch_command_parser

    return launch_command_parser()


def launcher_env(yaml_path: str | Path, extra_args: tuple[str, ...] = ()) -> tuple[argparse.Namespace, dict]:
    """(launcher args, process environment) for `accelerate launch --config_file yaml_path`."""
    from accelerate.commands.launch import _validate_launch_command
    from accelerate.utils.launch import prepare_deepspeed_cmd_env, prepare_multi_gpu_env

    args = _launch_parser().parse_args(["--config_file", str(yaml_path), *extra_args, "train.py"])
    args, defaults, mp_from_config = _validate_launch_command(args)
    if args.use_deepspeed:  # as accelerate.commands.launch.launch_command does
        fields = list(defaults.deepspeed_config.keys()) + (["mixed_precision"] if mp_from_config else [])
        args.deepspeed_fields_from_accelerate_config = ",".join(fields)
        with mock.patch("accelerate.utils.launch.is_port_in_use", return_value=False):
            _, env = prepare_deepspeed_cmd_env(args)
    else:
        with mock.patch("accelerate.utils.launch.is_port_in_use", return_value=False):
            env = prepare_multi_gpu_env(args)
    return args, env


def unknown_section_keys(yaml_path: str | Path) -> list[str]:
    """Keys inside fsdp_config / deepspeed_config / parallelism_config that no launcher flag
    takes (the launcher copies them onto its args and nothing reads them)."""
    import yaml

    flags = {a.dest for a in _launch_parser()._actions}
    data = yaml.safe_load(Path(yaml_path).read_text())
    unknown = []
    for section in ("fsdp_config", "deepspeed_config", "parallelism_config"):
        for key in data.get(section) or {}:
            dest = key if section != "fsdp_config" or key.startswith("fsdp") else f"fsdp_{key}"
            if dest not in flags:
                unknown.append(f"{section}.{key}")
    return unknown


def build_plugins(yaml_path: str | Path) -> SimpleNamespace:
    """The plugins each launched process builds: fsdp, deepspeed and parallelism (None where
    the config has none), plus the launcher args and environment."""
    from accelerate.parallelism_config import ParallelismConfig
    from accelerate.utils import DeepSpeedPlugin, FullyShardedDataParallelPlugin

    args, env = launcher_env(yaml_path)
    out = SimpleNamespace(args=args, env=env, fsdp=None, deepspeed=None, parallelism=None)
    with mock.patch.dict(os.environ, env, clear=True), \
            mock.patch("accelerate.utils.dataclasses.is_cuda_available", return_value=True), \
            mock.patch("torch.cuda.current_device", return_value=0):
        if env.get("ACCELERATE_USE_FSDP") == "true":
            out.fsdp = FullyShardedDataParallelPlugin()
            if env["ACCELERATE_MIXED_PRECISION"] != "no":  # as AcceleratorState does
                out.fsdp.set_mixed_precision(env["ACCELERATE_MIXED_PRECISION"])
        if env.get("ACCELERATE_USE_DEEPSPEED") == "true":
            out.deepspeed = DeepSpeedPlugin()
            out.deepspeed.set_mixed_precision(env["ACCELERATE_MIXED_PRECISION"])
        if env.get("ACCELERATE_USE_PARALLELISM_CONFIG") == "true":
            out.parallelism = ParallelismConfig()
    return out


def known_ds_top_level_keys() -> set[str]:
    """Top-level ds_config keys the emitter may write (plus steps_per_print, which Accelerate
    adds), each taken from DeepSpeed's constants: an import error here means DeepSpeed renamed one."""
    from deepspeed.runtime.constants import (
        BFLOAT16,
        FP16,
        GRADIENT_ACCUMULATION_STEPS,
        GRADIENT_CLIPPING,
        OPTIMIZER,
        STEPS_PER_PRINT,
        TRAIN_BATCH_SIZE,
        TRAIN_MICRO_BATCH_SIZE_PER_GPU,
        ZERO_FORCE_DS_CPU_OPTIMIZER,
    )
    from deepspeed.runtime.zero.config import ZERO_OPTIMIZATION

    return {TRAIN_BATCH_SIZE, TRAIN_MICRO_BATCH_SIZE_PER_GPU, GRADIENT_ACCUMULATION_STEPS,
            GRADIENT_CLIPPING, BFLOAT16, FP16, ZERO_OPTIMIZATION, OPTIMIZER, ZERO_FORCE_DS_CPU_OPTIMIZER,
            STEPS_PER_PRINT}


class _DataParallel:
    """An mpu: the only way to tell DeepSpeedConfig the world size without a process group."""

    def __init__(self, world: int):
        self.world = world

    def get_data_parallel_world_size(self) -> int:
        return self.world


def check_ds_config(config: dict | str | Path, world: int):
    """DeepSpeed's DeepSpeedConfig of `config` at `world` ranks; raises on anything it rejects
    and on top-level keys DeepSpeed does not know."""
    import deepspeed.runtime.config as ds_config_module
    from deepspeed.runtime.config import DeepSpeedConfig

    if not isinstance(config, dict):
        config = json.loads(Path(config).read_text())
    unknown = set(config) - known_ds_top_level_keys()
    if unknown:
        raise ValueError(f"unknown top-level DeepSpeed keys: {sorted(unknown)}")
    with mock.patch.object(ds_config_module.dist, "get_rank", return_value=0):
        parsed = DeepSpeedConfig(config, mpu=_DataParallel(world))
    if parsed.world_size != world:
        raise AssertionError(f"DeepSpeedConfig saw world size {parsed.world_size}, not {world}")
    return parsed
