#!/bin/bash
# Every hardware claim Tessera makes, in one prepared run on one GPU:
#
#   scripts/gpu_campaign.sh OUTDIR [TESSERA_BINARY]
#
# Writes into OUTDIR, each result as JSON:
#   facts.json        the GPU (nvidia-smi: name, driver, MIG mode, clocks,
#                     memory) and the software (tessera, Python, torch)
#   profile-pP.json   the model profiled over batch sizes 1..16 with P = 1,
#   profiles.csv      2, 3 processes at once under an MPS daemon this script
#                     starts and stops; the CSV holds them as Tessera profiles
#   plan.json         one service (p99 SLO) planned on those profiles with
#                     `tessera plan`'s defaults (percentile rule, its margin)
#   planned.json      the plan's busiest segment served with Poisson arrivals
#                     at the capacity the plan gives it, 60 s: the measured
#                     percentiles and the share within the SLO
#   procs-pP.json     the model served by P = 2, 3 processes at 0.8 and 0.9 of
#                     their full-batch throughput
#   shared.json       four light models sharing the GPU under the serialized
#                     discipline, 60 s (torch_serve.py --members): each
#                     member's share within its SLO
#   measured.json     `tessera simulate measured` of the four runs above:
#   measured.txt      the serving model's prediction beside each
#   trace.json        an oversubscription trace (four workloads, memory twice
#                     what the GPU leaves them) and its schedules run by
#   run-S-F.json      examples/executor/run_schedule.py in the orders of FIFO,
#                     the weight-greedy policy and the genetic algorithm,
#                     with (F = lookahead) and without (F = none) prefetching
#   runs.json         `tessera simulate runs`: measured against simulated
#   mig-lgip*.txt     with MIG mode enabled: `nvidia-smi mig -lgip` and
#                     `-lgipp` (the profiles and placements, read only)
#   mig.json          MIG: with MIG mode already enabled and GPU 0 without
#                     instances, a layout applied by `tessera deploy`, listed,
#                     one segment served, torn down; otherwise why not
#   campaign.json     every step's status and seconds, with facts.json's
#   steps.log         every step's command and output
#
# It reads the GPU's settings and never changes them: no MIG mode change,
# no reset, no clocks. Steps run one after another, each under a timeout;
# a failed step is recorded and the rest still run, and every step ends by
# TESSERA_CAMPAIGN_BUDGET_S (default 540) seconds (its timeout cut to what
# is left, none started after), so the whole run fits 9 minutes.
# TESSERA_CAMPAIGN_PYTHON is the Python with torch (and torchvision, or
# transformers for bert; default python3); TESSERA_CAMPAIGN_MODEL is
# resnet50 (default) or bert; TESSERA_CAMPAIGN_MEMBERS the shared run's
# members.
set -u
out=${1:?usage: scripts/gpu_campaign.sh OUTDIR [TESSERA_BINARY]}
tessera=${2:-target/release/tessera}
repo=$(cd "$(dirname "$0")/.." && pwd)
python=${TESSERA_CAMPAIGN_PYTHON:-python3}
model=${TESSERA_CAMPAIGN_MODEL:-resnet50}
budget_s=${TESSERA_CAMPAIGN_BUDGET_S:-540}
batch=16
# Four light models sharing one instance (MODEL:RATE_RPS:SLO_MS at batch 1),
# at rates meant to leave the executor well short of full on an H200 (where
# resnet50's batch of 1 took 0.93 ms; the others were not measured there):
# the run measures the busy share.
shared_members=${TESSERA_CAMPAIGN_MEMBERS:-resnet50:150:20,mobilenetv2:200:20,densenet121:100:30,vgg16:100:20}
mkdir -p "$out" && out=$(cd "$out" && pwd)
case $tessera in /*) ;; *) tessera=$(pwd)/$tessera ;; esac
serve="$repo/examples/workloads/torch_serve.py"
export TESSERA_STORE="$out/store.sqlite"
rm -f "$TESSERA_STORE" "$out/steps.log" "$out/steps.tsv" "$out/profiles.csv"
touch "$out/steps.log" "$out/steps.tsv"

# step NAME TIMEOUT_S [--to FILE] COMMAND...: runs COMMAND (its output to
# steps.log, or its standard output to FILE), records its status and time.
step() {
    local name=$1 limit=$2 to=""
    shift 2
    if [ "${1:-}" = --to ]; then
        to=$2
        shift 2
    fi
    local left=$((budget_s - SECONDS))
    if [ "$left" -le 0 ]; then
        echo "== $name: skipped, past the campaign's $budget_s s" | tee -a "$out/steps.log"
        printf '%s\tskipped\t0\n' "$name" >>"$out/steps.tsv"
        return 1
    fi
    # Every step ends by the budget: its timeout is cut to what is left.
    [ "$limit" -gt "$left" ] && limit=$left
    echo "== $name: $*" >>"$out/steps.log"
    local started=$SECONDS status
    if [ -n "$to" ]; then
        timeout "$limit" "$@" >"$to" 2>>"$out/steps.log"
    else
        timeout "$limit" "$@" >>"$out/steps.log" 2>&1
    fi
    status=$?
    if [ -n "$to" ] && [ "$status" != 0 ] && [ ! -s "$to" ]; then
        rm -f "$to"
    fi
    echo "== $name: status $status after $((SECONDS - started)) s" | tee -a "$out/steps.log"
    printf '%s\t%s\t%s\n' "$name" "$status" "$((SECONDS - started))" >>"$out/steps.tsv"
    return $status
}

# A field of a JSON file: json FILE PYTHON-EXPRESSION-OF-d (plain python3,
# no torch needed).
json() {
    python3 -c 'import json, sys; d = json.load(open(sys.argv[1])); print(eval(sys.argv[2]))' "$1" "$2"
}

# --- The node -----------------------------------------------------------
smi=$(nvidia-smi --query-gpu=name,driver_version,mig.mode.current,clocks.sm,clocks.max.sm,memory.total \
    --format=csv,noheader -i 0 2>&1)
mig_mode=$(echo "$smi" | cut -d, -f3 | tr -d ' ')
gpu_name=$(echo "$smi" | cut -d, -f1)
case $gpu_name in
    *H200*) gpu_model=h200-141gb link=pcie5 ;;
    *B200*) gpu_model=b200-180gb link=pcie5 ;;
    *H100*) gpu_model=h100-80gb link=pcie5 ;;
    *A100*80GB*) gpu_model=a100-80gb link=pcie4 ;;
    *A100*) gpu_model=a100-40gb link=pcie4 ;;
    *) gpu_model="" link=pcie4 ;;
esac
torch_version=$("$python" -c 'import torch; print(torch.__version__, "cuda", torch.version.cuda)' 2>&1 | tail -1)
python3 - "$out/facts.json" "$smi" "$("$tessera" --version 2>&1)" "$("$python" --version 2>&1)" "$torch_version" \
    "$gpu_model" <<'EOF'
import json, sys
path, smi, tessera, python, torch, gpu_model = sys.argv[1:]
fields = ["name", "driver_version", "mig_mode", "clocks_sm", "clocks_max_sm", "memory_total"]
parts = [part.strip() for part in smi.split(",")]
facts = {"nvidia_smi": dict(zip(fields, parts)) if len(parts) == len(fields) else {"error": smi},
         "tessera": tessera, "python": python, "torch": torch, "gpu_model": gpu_model or None}
json.dump(facts, open(path, "w"), indent=1)
EOF

# Where CUDA runs: the whole GPU 0, or with MIG on its first MIG device.
device=0
size=7
if [ "$mig_mode" = Enabled ]; then
    first=$(nvidia-smi -L 2>/dev/null | grep -m1 -o 'MIG [0-9]g[^ ]* *Device *[0-9]*: (UUID: MIG-[^)]*)')
    device=$(echo "$first" | grep -o 'MIG-[^)]*')
    size=$(echo "$first" | sed -n 's/^MIG \([0-9]\)g.*/\1/p')
fi
export CUDA_VISIBLE_DEVICES=$device

# --- An MPS daemon of this run's own, stopped on every exit ----------------
export CUDA_MPS_PIPE_DIRECTORY="$out/mps/pipe" CUDA_MPS_LOG_DIRECTORY="$out/mps/log"
mkdir -p "$CUDA_MPS_PIPE_DIRECTORY" "$CUDA_MPS_LOG_DIRECTORY"
mps_running=0
stop_mps() {
    if [ "$mps_running" = 1 ]; then
        echo quit | nvidia-cuda-mps-control >>"$out/steps.log" 2>&1
        mps_running=0
    fi
}
trap stop_mps EXIT
if [ -n "$device" ] && step mps-start 20 nvidia-cuda-mps-control -d; then
    mps_running=1
fi

# --- Profiles: 1, 2 and 3 processes at once --------------------------------
if [ -z "$device" ]; then
    echo "== serving: skipped, MIG is enabled and GPU 0 has no MIG device to run on" | tee -a "$out/steps.log"
else
    for procs in 1 2 3; do
        step "profile-p$procs" 150 "$python" "$serve" --model "$model" --batch "$batch" --procs "$procs" \
            --profile-only --profile-runs 100 --profile-csv "$out/profiles.csv" --gpu-model "${gpu_model:-unknown}" \
            --size-gpcs "$size" --output "$out/profile-p$procs.json"
    done
fi

# --- One service planned on them, served at its planned capacity ----------
if [ -n "$gpu_model" ] && [ -s "$out/profile-p1.json" ]; then
    # The SLO: four full batches of one process; the rate: 2.5 full-batch
    # throughputs of one process, so the plan weighs several segments.
    slo_ms=$(json "$out/profile-p1.json" 'round(4 * d["profile"][-1]["latency_ms"], 2)')
    rate_rps=$(json "$out/profile-p1.json" 'round(2.5 * d["max_batch"] * 1000 / d["profile"][-1]["latency_ms"])')
    printf 'service,model,rate_rps,latency_ms,percentile\n%s-p99,%s,%s,%s,99\n' \
        "$model" "$model" "$rate_rps" "$slo_ms" >"$out/services.csv"
    if step plan 60 "$tessera" plan --profiles "$out/profiles.csv" --slo "$out/services.csv" --gpu "$gpu_model" \
        --format json --output "$out/plan.json"; then
        # The segment the plan routes the most to.
        segment=$(json "$out/plan.json" \
            '" ".join(str(i[k]) for i in [max((i for g in d["gpus"] for i in g["instances"]), key=lambda i: i.get("capacity_rps", i["throughput_rps"]))] for k in ("batch", "procs", "capacity_rps"))')
        read -r seg_batch seg_procs seg_capacity <<<"$segment"
        step planned 200 "$python" "$serve" --model "$model" --batch "$seg_batch" --procs "$seg_procs" \
            --rate-rps "$seg_capacity" --slo-ms "$slo_ms" --seconds 60 --warmup-s 5 --output "$out/planned.json"
    fi
else
    echo "== plan: skipped, no profile or no GPU model Tessera knows ('$gpu_name')" | tee -a "$out/steps.log"
fi

# --- Several MPS processes against the serving model ----------------------
if [ -n "$device" ]; then
    for procs in 2 3; do
        step "procs-p$procs" 150 "$python" "$serve" --model "$model" --batch "$batch" --procs "$procs" \
            --utilisation 0.8,0.9 --seconds 20 --warmup-s 2 --profile-runs 100 --output "$out/procs-p$procs.json"
    done
fi
# --- Light models sharing one instance, serialized (one executor) ----------
if [ -n "$device" ]; then
    step shared 200 "$python" "$serve" --members "$shared_members" --seconds 60 --output "$out/shared.json"
fi
stop_mps
runs=()
for run in planned procs-p2 procs-p3 shared; do
    [ -s "$out/$run.json" ] && runs+=("$out/$run.json")
done
if [ ${#runs[@]} -gt 0 ]; then
    step measured 120 --to "$out/measured.json" "$tessera" simulate measured --simulated-runs 10 --format json "${runs[@]}"
    step measured-table 120 --to "$out/measured.txt" "$tessera" --wide simulate measured --simulated-runs 10 "${runs[@]}"
fi

# --- Oversubscription schedules on the GPU --------------------------------
if [ -n "$device" ] && step trace 30 --to "$out/trace.json" "$tessera" simulate generate --clients 4 --operations 3 \
    --oversubscription 2 --transfer-ratio 1 --link "$link" --seed 1; then
    for scheduler in fifo greedy ga; do
        for prefetch in none lookahead:1; do
            step "run-$scheduler-${prefetch%%:*}" 90 --to "$out/run-$scheduler-${prefetch%%:*}.json" \
                "$tessera" simulate run "$out/trace.json" --gpu 0 --scheduler "$scheduler" --prefetch "$prefetch" \
                --program "$python $repo/examples/executor/run_schedule.py" --format json
        done
    done
    schedules=()
    for run in "$out"/run-*.json; do
        [ -s "$run" ] && schedules+=("$run")
    done
    [ ${#schedules[@]} -gt 0 ] && step runs 60 --to "$out/runs.json" "$tessera" simulate runs --format json "${schedules[@]}"
fi

# --- MIG: only where it is already on, and only on an empty GPU 0 ----------
mig_note() { # mig_note STATUS WORDS
    python3 -c 'import json, sys; json.dump({"mig_mode": sys.argv[2], "status": sys.argv[3], "note": sys.argv[4]}, open(sys.argv[1], "w"), indent=1)' \
        "$out/mig.json" "$mig_mode" "$1" "$2"
}
if [ "$mig_mode" = Enabled ]; then
    # The GPU's MIG profiles and placements as its driver lists them: the
    # golden text Tessera's GPU model rows are checked against.
    step mig-lgip 20 --to "$out/mig-lgip.txt" nvidia-smi mig -lgip
    step mig-lgipp 20 --to "$out/mig-lgipp.txt" nvidia-smi mig -lgipp
fi
if [ "$mig_mode" != Enabled ]; then
    mig_note skipped "MIG mode is $mig_mode on GPU 0; this campaign never changes it"
elif nvidia-smi mig -i 0 -lgi >"$out/mig-before.txt" 2>&1; then
    mig_note skipped "GPU 0 already has GPU instances (mig-before.txt); the campaign changes only an empty GPU"
elif [ -z "$gpu_model" ]; then
    mig_note skipped "'$gpu_name' is not a GPU model Tessera knows"
else
    # One 3g instance at its first placement, the registered workload serving
    # 20 s of Poisson arrivals at half its throughput, then torn down.
    step mig-workload 30 "$tessera" workload add "$model" --family "$model" --task inference --batch "$batch" \
        --command "$python $serve --model $model --batch {batch} --utilisation 0.5 --seconds 20 --output $out/mig-served.json"
    python3 - "$out/mig-plan.json" "$gpu_model" "$model" "$batch" <<'EOF'
import json, sys
path, gpu_model, model, batch = sys.argv[1], sys.argv[2], sys.argv[3], int(sys.argv[4])
instance = {"profile": {"h200-141gb": "3g.71gb", "b200-180gb": "3g.90gb", "h100-80gb": "3g.40gb",
                        "a100-80gb": "3g.40gb", "a100-40gb": "3g.20gb"}[gpu_model],
            "size": 3, "start": 4, "service": model, "model": model, "batch": batch, "procs": 1,
            "throughput_rps": 1.0, "latency_ms": 1.0}
plan = {"gpu_count": 1, "strategy": "campaign", "latency_rule": "parva", "gpus_per_node": 8, "services": [],
        "gpus": [{"node": 0, "index": 0, "gpu_model": gpu_model, "instances": [instance]}]}
json.dump(plan, open(path, "w"), indent=1)
EOF
    step mig-apply 120 "$tessera" deploy "$out/mig-plan.json" --node 0 --apply --mps-dir "$out/mig-mps"
    step mig-lgi 20 --to "$out/mig-lgi.txt" nvidia-smi mig -i 0 -lgi
    step mig-lci 20 --to "$out/mig-lci.txt" nvidia-smi mig -i 0 -lci
    for _ in $(seq 60); do [ -s "$out/mig-served.json" ] && break; sleep 2; done
    step mig-status 30 "$tessera" deploy status "$out/mig-plan.json" --node 0
    for pipe in "$out"/mig-mps/*/pipe; do
        [ -d "$pipe" ] && echo quit | CUDA_MPS_PIPE_DIRECTORY=$pipe nvidia-cuda-mps-control >>"$out/steps.log" 2>&1
    done
    sleep 2
    step mig-dci 30 nvidia-smi mig -i 0 -dci
    step mig-dgi 30 nvidia-smi mig -i 0 -dgi
    if [ -s "$out/mig-served.json" ]; then
        mig_note applied "3g instance applied by tessera deploy, served (mig-served.json), torn down"
    else
        mig_note failed "see steps.log from mig-plan on"
    fi
fi

# --- The index --------------------------------------------------------------
python3 - "$out" <<'EOF'
import json, os, sys
out = sys.argv[1]
steps = []
for line in open(os.path.join(out, "steps.tsv")):
    name, status, seconds = line.rstrip("\n").split("\t")
    steps.append({"step": name, "status": status, "seconds": int(seconds)})
results = sorted(name for name in os.listdir(out) if name.endswith(".json") and name != "campaign.json")
campaign = {**json.load(open(os.path.join(out, "facts.json"))), "steps": steps, "results": results}
json.dump(campaign, open(os.path.join(out, "campaign.json"), "w"), indent=1)
failed = [s["step"] for s in steps if s["status"] != "0"]
print(f"campaign: {len(steps)} steps, {len(failed)} failed or skipped{': ' + ', '.join(failed) if failed else ''}")
EOF
echo "campaign: $SECONDS s; results in $out"
