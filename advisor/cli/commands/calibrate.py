"""`advisor calibrate`: measure this node's GPUs and store a profile (wraps torchrun for one
node; across nodes run `torchrun ... -m calibration run` on each, see calibration/__main__.py).

Without a GPU it runs the same code on the CPU with gloo at tiny sizes (2 processes), says so,
and stores a profile that describes this CPU (never matched to a GPU estimate).
"""

from __future__ import annotations

import argparse


def add_parser(subparsers: argparse._SubParsersAction) -> None:
    p = subparsers.add_parser("calibrate", help="measure this node's GPUs and store a calibration profile")
    p.add_argument("--quick", action="store_true", help="fewer sizes and repeats: about a minute")
    p.add_argument("--name", help="profile name (default: <gpu>-<nodes>x<gpus>-<date>-<random>)")
    p.add_argument("--nproc", type=int, help="processes = GPUs to use (default: all; 2 without a GPU)")
    p.add_argument("--out", help="also write the profile as JSON to this file")
    p.add_argument("--nvme-path", help="directory on the NVMe drive to benchmark (for NVMe offload)")
    p.add_argument("--model", help="model preset whose layer shape the GEMM probe and runs use")
    p.add_argument("--strategies", help="strategy runs (default: ddp,fsdp,zero1,zero2,zero2-offload,zero3)")
    p.add_argument("--ds-cpu-adam", action="store_true",
                   help="also time DeepSpeed's CPU Adam (may JIT-build its C++ op once: minutes)")
    p.add_argument("--no-store", action="store_true", help=f"do not store the profile in {_STORE}")
    p.set_defaults(run=run)


_STORE = "$ADVISOR_HOME/profiles.db (default ~/.advisor)"


def count_gpus() -> int:
    """GPUs this process may use, without importing torch: CUDA_VISIBLE_DEVICES, else
    `nvidia-smi -L`; 0 when neither shows one."""
    import os
    import shutil
    import subprocess

    visible = os.environ.get("CUDA_VISIBLE_DEVICES")
    if visible is not None:
        return len([d for d in visible.split(",") if d.strip() and d.strip() != "-1"])
    if not shutil.which("nvidia-smi"):
        return 0
    try:
        out = subprocess.run(["nvidia-smi", "-L"], capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.TimeoutExpired):
        return 0
    return sum(line.startswith("GPU ") for line in out.stdout.splitlines())


def launch(calibration_args: list[str], nproc: int, gpus: int, stdout=None) -> int:
    """`torchrun --standalone --nproc-per-node nproc -m calibration ...` with this interpreter;
    returns its exit status. One OpenMP thread per process in CPU mode (the processes share the
    cores), the node's cores split between GPU processes otherwise."""
    import importlib.util
    import os
    import subprocess
    import sys

    from advisor.core.errors import InvalidInput

    if importlib.util.find_spec("torch") is None:
        raise InvalidInput("calibrate", "needs torch (and DeepSpeed for the ZeRO runs) in this "
                           "environment", "pip install torch deepspeed, or ./setup.sh --test")
    threads = 1 if not gpus else max(1, (os.cpu_count() or 1) // nproc)
    env = {**os.environ, "OMP_NUM_THREADS": os.environ.get("OMP_NUM_THREADS", str(threads))}
    if not gpus:
        env.setdefault("DS_ACCELERATOR", "cpu")
    cmd = [sys.executable, "-m", "torch.distributed.run", "--standalone", f"--nproc-per-node={nproc}",
           "-m", "calibration", *calibration_args]
    return subprocess.run(cmd, env=env, stdout=stdout).returncode


def run(args: argparse.Namespace) -> int:
    import sys

    gpus = count_gpus()
    nproc = args.nproc or gpus or 2
    if not gpus:
        print(f"advisor calibrate: no GPU found: CPU mode, gloo, tiny sizes, {nproc} processes. The "
              "profile describes this CPU and is never matched to a GPU estimate.", file=sys.stderr)
    forwarded = ["run", "--invoked-as", "advisor " + " ".join(sys.argv[1:] or ["calibrate"])]
    for flag in ("quick", "no_store", "ds_cpu_adam"):
        if getattr(args, flag):
            forwarded.append("--" + flag.replace("_", "-"))
    for flag in ("name", "out", "nvme_path", "model", "strategies"):
        if getattr(args, flag):
            forwarded += ["--" + flag.replace("_", "-"), str(getattr(args, flag))]
    code = launch(forwarded, nproc, gpus)
    if code:
        print(f"advisor calibrate: the calibration run failed (exit {code})", file=sys.stderr)
    return 1 if code else 0
