#!/bin/bash
# Why one as-today run of bench/gpu/run_xhost_one_gpu.sh had its collectives at exactly two thirds of the others
# (docs/results/xhost-1gpu-4nodes-h200-2026-12-07/): the independent collective (collective_ref.py --share-gpu, four
# ranks on GPU 0, each its own NCCL host, NET/Socket on lo) RUNS times, with NCCL_DEBUG=INFO, each run's busbw
# beside the channels NCCL built. Usage (repository root): OUT=/some/dir RUNS=8 bash bench/gpu/run_share_gpu_channels.sh
set -uo pipefail
REPO=$(cd "$(dirname "$0")/../.." && pwd)
OUT=${OUT:-$REPO/gpu-out}
PY=${SPARKFORGE_GPU_PYTHON:-/opt/torch/.venv/bin/python3}
RUNS=${RUNS:-8}
mkdir -p "$OUT"
for i in $(seq 1 "$RUNS"); do
    NCCL_DEBUG=INFO NCCL_DEBUG_SUBSYS=INIT,NET NCCL_SOCKET_IFNAME=lo timeout 120 "$PY" "$REPO/bench/gpu/collective_ref.py" \
        --share-gpu --world "${N:-4}" --sizes "${SIZES:-67108864}" --iters "${ITERS:-10}" --warmup "${WARMUP:-3}" \
        --out "$OUT/channels-$i.json" | sed "s/^/run $i: /"
done | tee "$OUT/channels.txt"
