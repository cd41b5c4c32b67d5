#!/bin/bash
# Real-hardware smoke run of Tessera's profiling commands on one GPU node.
#
#   scripts/gpu_smoke.sh OUTDIR [TESSERA_BINARY]
#
# Registers two small PyTorch workloads (examples/workloads/torch_infer.py),
# measures each alone (NVML), profiles their kernels (Nsight Compute),
# colocates them under a private MPS daemon, measures segment profiles of
# one, and prints what a deploy would do on GPU 0 -- all into OUTDIR: probe.log (the node), steps.log (every
# step's command, output, status and time), the plan and the SQLite store.
# It only reads the GPU's settings: it never changes MIG mode, clocks or
# anything else, and `deploy` runs as a dry run.
set -u
out=${1:?usage: scripts/gpu_smoke.sh OUTDIR [TESSERA_BINARY]}
tessera=${2:-target/release/tessera}
repo=$(cd "$(dirname "$0")/.." && pwd)
mkdir -p "$out"
export TESSERA_STORE="$out/store.sqlite"
rm -f "$TESSERA_STORE" "$out/steps.log"

step() { # step NAME TIMEOUT_S COMMAND...
    local name=$1 limit=$2
    shift 2
    echo "== $name: $*" >>"$out/steps.log"
    local started=$SECONDS
    timeout "$limit" "$@" >>"$out/steps.log" 2>&1
    local status=$?
    echo "== $name: status $status after $((SECONDS - started)) s" | tee -a "$out/steps.log"
    return $status
}

{
    nvidia-smi
    nvidia-smi --query-gpu=name,memory.total,mig.mode.current,driver_version --format=csv
    command -v ncu nvidia-cuda-mps-control python3
    ncu --version
    python3 -c 'import torch; print("torch", torch.__version__, torch.cuda.get_device_name(0))'
} >"$out/probe.log" 2>&1

script="$repo/examples/workloads/torch_infer.py"
step add-mlp 30 "$tessera" workload add mlp-b256 --family mlp --task inference --batch 256 \
    --command "python3 $script --model mlp --batch {batch}"
step add-conv 30 "$tessera" workload add conv-b64 --family conv --task inference --batch 64 \
    --command "python3 $script --model conv --batch {batch}"
step run-mlp 60 "$tessera" profile run mlp-b256 --duration 15 --interval-ms 100
step run-conv 60 "$tessera" profile run conv-b64 --duration 15 --interval-ms 100
step kernels-mlp 240 "$tessera" profile kernels mlp-b256 --launch-skip 100 --launch-count 40 --timeout 200
step kernels-conv 240 "$tessera" profile kernels conv-b64 --launch-skip 100 --launch-count 40 --timeout 200
step colocate 90 "$tessera" profile colocate mlp-b256 conv-b64 --duration 20
step workloads 30 "$tessera" workload list
# Segment profiles: MIG instances that exist, else (MIG off) the whole GPU.
if nvidia-smi --query-gpu=mig.mode.current --format=csv,noheader -i 0 | grep -q Enabled; then
    where=""
else
    where="--whole-gpu"
fi
step segments 180 "$tessera" profile segments mlp-b256 $where --batches 64,256 --procs 1,2 --duration 12
step profiles 30 "$tessera" profiles list
step plan 60 "$tessera" plan --demo --gpu h200-141gb --format json --output "$out/plan.json"
step deploy-dry-run 60 "$tessera" deploy "$out/plan.json" --node 0 --dry-run
step deploy-status 60 "$tessera" deploy status "$out/plan.json" --node 0
# No MPS daemon may be left running (an exited one that its parent, the
# node's init, has not reaped yet shows as a zombie: state Z).
left=$(ps -eo pid=,stat=,args= | awk '$2 !~ /^Z/ && /nvidia-cuda-mps/ && !/awk/')
echo "MPS processes left: ${left:-none}" | tee -a "$out/steps.log"
