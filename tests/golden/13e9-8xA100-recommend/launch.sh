#!/usr/bin/env bash
# Launch fsdp for 13B (inferred) on 8xA100 (1 x 8 A100-80GB).
# Written by advisor. Run it on the node:
#   bash launch.sh train.py [script arguments...]
#
# Variables:
#   MAIN_PROCESS_PORT  a free TCP port (default 29500)
#
# LAUNCHER picks the command:
#   accelerate  (default) applies accelerate_config.yaml to a script that uses Accelerator
#   torchrun    runs the script as is: it must set up FSDP / DDP itself (the YAML is not read)
set -euo pipefail
PLAN_DIR="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
if [ "$#" -lt 1 ]; then
  echo "usage: $0 TRAIN_SCRIPT [ARGS...]" >&2
  exit 2
fi
MAIN_PROCESS_PORT="${MAIN_PROCESS_PORT:-29500}"

case "${LAUNCHER:-accelerate}" in
  accelerate)
    exec accelerate launch --config_file "$PLAN_DIR/accelerate_config.yaml" \
      --main_process_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  torchrun)
    exec torchrun --nnodes 1 --nproc_per_node 8 --master_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  *)
    echo "LAUNCHER must be one of: accelerate, torchrun" >&2
    exit 2
    ;;
esac
