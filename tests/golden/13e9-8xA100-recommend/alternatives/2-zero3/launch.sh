#!/usr/bin/env bash
# Launch zero3 for 13B (inferred) on 8xA100 (1 x 8 A100-80GB).
# Written by advisor. Run it on the node:
#   bash launch.sh train.py [script arguments...]
#
# Variables:
#   MAIN_PROCESS_PORT  a free TCP port (default 29500)
#
# LAUNCHER picks the command:
#   accelerate  (default) applies accelerate_config.yaml and ds_config.json to a script that uses Accelerator
#   torchrun    runs the script as is: it must set up DeepSpeed itself (the YAML is not read)
#   deepspeed   DeepSpeed's launcher, for a script that calls deepspeed.initialize; adds
#               --deepspeed --deepspeed_config ds_config.json after the script arguments
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
      --deepspeed_config_file "$PLAN_DIR/ds_config.json" \
      --main_process_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  torchrun)
    exec torchrun --nnodes 1 --nproc_per_node 8 --master_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  deepspeed)
    exec deepspeed --num_gpus 8 --master_port "$MAIN_PROCESS_PORT" \
      "$@" --deepspeed --deepspeed_config "$PLAN_DIR/ds_config.json"
    ;;
  *)
    echo "LAUNCHER must be one of: accelerate, torchrun, deepspeed" >&2
    exit 2
    ;;
esac
