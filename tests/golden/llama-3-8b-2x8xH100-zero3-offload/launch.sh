#!/usr/bin/env bash
# Launch zero3-offload for llama-3-8b on 2x8xH100 (2 x 8 H100-80GB).
# Written by advisor. Run it on every node:
#   bash launch.sh train.py [script arguments...]
#
# Per-node variables (export them before running this script on each node):
#   NODE_RANK          this node's index: 0 on the node at MAIN_PROCESS_IP, then 1 .. 1
#   MAIN_PROCESS_IP    address of node 0, reachable from every node
#   MAIN_PROCESS_PORT  a free TCP port on node 0 (default 29500)
#   HOSTFILE           only for LAUNCHER=deepspeed: DeepSpeed hostfile, one "host slots=8" line per node
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
: "${NODE_RANK:?set NODE_RANK to this node's index, 0 .. 1}"
: "${MAIN_PROCESS_IP:?set MAIN_PROCESS_IP to node 0's address}"
MAIN_PROCESS_PORT="${MAIN_PROCESS_PORT:-29500}"

case "${LAUNCHER:-accelerate}" in
  accelerate)
    exec accelerate launch --config_file "$PLAN_DIR/accelerate_config.yaml" \
      --deepspeed_config_file "$PLAN_DIR/ds_config.json" \
      --machine_rank "$NODE_RANK" --main_process_ip "$MAIN_PROCESS_IP" \
      --main_process_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  torchrun)
    exec torchrun --nnodes 2 --nproc_per_node 8 --node_rank "$NODE_RANK" \
      --master_addr "$MAIN_PROCESS_IP" --master_port "$MAIN_PROCESS_PORT" "$@"
    ;;
  deepspeed)
    exec deepspeed --hostfile "${HOSTFILE:?set HOSTFILE to a DeepSpeed hostfile listing the 2 nodes}" \
      --no_ssh --node_rank "$NODE_RANK" --master_addr "$MAIN_PROCESS_IP" --master_port "$MAIN_PROCESS_PORT" \
      "$@" --deepspeed --deepspeed_config "$PLAN_DIR/ds_config.json"
    ;;
  *)
    echo "LAUNCHER must be one of: accelerate, torchrun, deepspeed" >&2
    exit 2
    ;;
esac
