#!/usr/bin/env python3
"""Serves a ParvaGPU-like model on one GPU under Poisson arrivals, as Tessera's serving model assumes.

Checks Tessera's serving model against a real GPU. It runs a segment's
--procs server processes (MPS processes when an MPS daemon serves the GPU)
on the one GPU they see (set CUDA_VISIBLE_DEVICES to a GPU index or a MIG
UUID), each with the discipline the model assumes: one FIFO queue; whenever
the process is free it takes every waiting request, up to its largest batch,
runs them as one batch, and every request in it completes when the batch
does. Requests are routed to the processes at random, as a Kubernetes
Service in front of a segment's pods does, so each process serves Poisson
arrivals at the segment's rate over --procs. Each batch size is captured as
a CUDA graph (as a serving runtime would run a compiled engine), so a batch
costs one launch.

1. Profile: every batch size 1..--batch, run back to back by every process
   at once (--profile-runs each after a warm-up): its mean, median and 99th
   percentile latency, the profile Tessera reads, with the spread of its
   batch times (with several processes, a batch's latency while the others
   run theirs, as ParvaGPU profiles them). --profile-csv also writes it as
   Tessera profile rows, for `tessera plan --profiles`.
2. Serve (unless --profile-only): for each --utilisation u, Poisson arrivals
   at u times the segment's full-batch throughput for --seconds, or one level
   at --rate-rps (a plan's capacity for the segment); the first --warmup-s
   seconds' requests are not counted.

Writes one JSON object (--output, else stdout): the GPU, the profile, and per
level the offered rate, the requests counted, their p50/p90/p99/p99.9
latency (ms from arrival to its batch's completion), with --slo-ms the share
within it, the batches run by size and their mean service time, and the mean
dispatch gap between a batch's completion and the next one's start while
requests waited. `tessera simulate measured` reads it. Only reads the GPU's
settings.

    python3 examples/workloads/torch_serve.py --model resnet50 --batch 16 \
        --utilisation 0.5,0.8,0.95 --seconds 30 --output resnet50.json
    python3 examples/workloads/torch_serve.py --model resnet50 --batch 16 --procs 2 \
        --rate-rps 14000 --slo-ms 5 --seconds 60 --output planned.json

With --members, one shared instance under the serialized discipline instead
(a plan's `sharing: serialized`): several models in one process, each
member with its own Poisson stream at its rate and its own queue, one
executor running one batch at a time from the member whose oldest waiting
request is oldest. Each member (MODEL:RATE_RPS:SLO_MS[:BATCH], batch 1 by
default) is profiled alone first; the JSON then has, per member, its
profile, the requests counted, their percentiles and the share within its
SLO, beside the executor's measured busy share:

    python3 examples/workloads/torch_serve.py \
        --members resnet50:40:150,mobilenetv2:60:100,densenet121:20:200,vgg16:15:120 \
        --seconds 90 --output shared.json
"""

from __future__ import annotations

import argparse
import csv
import json
import multiprocessing
import os
import queue
import subprocess
import sys
import time

# numpy and torch are imported by load(), so that --help and the checks of
# the arguments need neither.
np = None
torch = None

# How long a process waits for the others at a phase's start, seconds.
PHASE_TIMEOUT_S = 900


def load() -> None:
    """Imports numpy and torch into this module's globals."""
    global np, torch
    import numpy
    import torch as torch_module

    np = numpy
    torch = torch_module


def build(model: str, device: torch.device):
    """The model (random weights: no download) and a function making its input batch."""
    if model in ("resnet50", "densenet121", "mobilenetv2", "vgg16"):
        import torchvision

        constructor = {
            "resnet50": torchvision.models.resnet50,
            "densenet121": torchvision.models.densenet121,
            "mobilenetv2": torchvision.models.mobilenet_v2,
            "vgg16": torchvision.models.vgg16,
        }[model]
        net = constructor(weights=None).to(device).half().eval().to(memory_format=torch.channels_last)

        def inputs(batch: int) -> torch.Tensor:
            x = torch.randn(batch, 3, 224, 224, device=device, dtype=torch.half)
            return x.contiguous(memory_format=torch.channels_last)

        return net, inputs
    if model == "bert":
        from transformers import BertConfig, BertModel

        net = BertModel(BertConfig()).to(device).half().eval()

        def inputs(batch: int) -> torch.Tensor:
            return torch.randint(0, 30000, (batch, 128), device=device)

        return net, inputs
    raise SystemExit(f"unknown model {model!r}: use resnet50, densenet121, mobilenetv2, vgg16 or bert")


def capture(net, inputs, max_batch: int):
    """One CUDA graph per batch size 1..max_batch, sharing one input buffer and one memory pool.

    Returns the graphs and the input buffer they read: the caller keeps both,
    and the net, alive for as long as it replays them."""
    static = inputs(max_batch)
    graphs = {}
    pool = None
    side = torch.cuda.Stream()
    with torch.inference_mode():
        for batch in range(1, max_batch + 1):
            view = static[:batch]
            side.wait_stream(torch.cuda.current_stream())
            with torch.cuda.stream(side):
                for _ in range(3):
                    net(view)
            torch.cuda.current_stream().wait_stream(side)
            graph = torch.cuda.CUDAGraph()
            with torch.cuda.graph(graph, pool=pool):
                net(view)
            pool = graph.pool()
            graphs[batch] = graph
    torch.cuda.synchronize()
    return graphs, static


def run_batch(graph) -> None:
    graph.replay()
    torch.cuda.synchronize()


def batch_times_ms(graph, runs: int):
    """`runs` back-to-back runs of one captured batch after a warm-up, each one's latency in ms."""
    for _ in range(max(10, runs // 5)):
        run_batch(graph)
    times_ms = np.empty(runs)
    for i in range(runs):
        started = time.perf_counter()
        run_batch(graph)
        times_ms[i] = (time.perf_counter() - started) * 1000.0
    return times_ms


def profile_rows(times_by_batch: list) -> list:
    """Each batch size's mean, median and 99th percentile latency over every process's runs."""
    rows = []
    for batch in sorted(times_by_batch[0]):
        times_ms = np.concatenate([times[batch] for times in times_by_batch])
        rows.append(
            {
                "batch": batch,
                "latency_ms": float(times_ms.mean()),
                "p50_ms": float(np.percentile(times_ms, 50)),
                "p99_ms": float(np.percentile(times_ms, 99)),
            }
        )
    return rows


def profile(graphs, runs: int) -> list:
    """One process's profile: every batch size's latency, run back to back."""
    return profile_rows([{batch: batch_times_ms(graph, runs) for batch, graph in graphs.items()}])


def serve(graphs, max_batch: int, rate_rps: float, seconds: float, warmup_s: float, rng) -> dict:
    """One process: Poisson arrivals at rate_rps for `seconds`, served FIFO in batches of up to max_batch."""
    gaps = rng.exponential(1.0 / rate_rps, size=int(rate_rps * seconds * 1.2) + 100)
    arrivals = np.cumsum(gaps)
    arrivals = arrivals[arrivals < seconds]
    n = len(arrivals)
    done = np.empty(n)
    batch_counts = np.zeros(max_batch + 1, dtype=np.int64)
    batch_time_s = np.zeros(max_batch + 1)
    most_waiting = 0
    # Time between a batch's completion and the next batch's start while
    # requests were already waiting: the loop's own dispatch overhead.
    dispatch_gap_s = 0.0
    dispatch_gaps = 0
    last_finished = None
    head = 0
    clock = time.perf_counter
    origin = clock()
    while head < n:
        now = clock() - origin
        arrived = int(np.searchsorted(arrivals, now, side="right"))
        if arrived == head:
            due = arrivals[head]
            while clock() - origin < due:
                pass
            continue
        most_waiting = max(most_waiting, arrived - head)
        batch = min(arrived - head, max_batch)
        started = clock()
        if last_finished is not None and arrivals[head] <= last_finished - origin:
            dispatch_gap_s += started - last_finished
            dispatch_gaps += 1
        run_batch(graphs[batch])
        finished = last_finished = clock()
        done[head : head + batch] = finished - origin
        batch_counts[batch] += 1
        batch_time_s[batch] += finished - started
        head += batch
    counted = arrivals >= warmup_s
    return {
        "latency_ms": (done - arrivals)[counted] * 1000.0,
        "most_waiting": most_waiting,
        "dispatch_gap_s": dispatch_gap_s,
        "dispatch_gaps": dispatch_gaps,
        "batch_counts": batch_counts,
        "batch_time_s": batch_time_s,
    }


def level_summary(parts: list, rate_rps: float, settings: dict) -> dict:
    """One load as every process of the segment served it, merged."""
    latency_ms = np.concatenate([part["latency_ms"] for part in parts])
    batch_counts = sum(part["batch_counts"] for part in parts)
    batch_time_s = sum(part["batch_time_s"] for part in parts)
    gap_s = sum(part["dispatch_gap_s"] for part in parts)
    gaps = sum(part["dispatch_gaps"] for part in parts)
    ran = [b for b in range(1, settings["batch"] + 1) if batch_counts[b] > 0]
    level = {
        "rate_rps": rate_rps,
        "arrived_rps": float(len(latency_ms) / (settings["seconds"] - settings["warmup_s"])),
        "requests": int(len(latency_ms)),
        "p50_ms": float(np.percentile(latency_ms, 50)),
        "p90_ms": float(np.percentile(latency_ms, 90)),
        "p99_ms": float(np.percentile(latency_ms, 99)),
        "p999_ms": float(np.percentile(latency_ms, 99.9)),
        "mean_ms": float(latency_ms.mean()),
        "most_waiting": max(part["most_waiting"] for part in parts),
        "dispatch_gap_us": gap_s / gaps * 1e6 if gaps else None,
        "batches": {str(b): int(batch_counts[b]) for b in ran},
        "service_ms_by_batch": {str(b): float(batch_time_s[b] / batch_counts[b] * 1000.0) for b in ran},
    }
    if settings["slo_ms"] is not None:
        level["slo_ms"] = settings["slo_ms"]
        level["within_slo"] = float((latency_ms <= settings["slo_ms"]).mean())
    return level


def worker(index: int, settings: dict, barrier, orders, results) -> None:
    """One process of the segment: builds and captures the model, profiles with the others, then serves
    each rate the parent sends (its share: the segment's rate over --procs) from its own Poisson stream."""
    try:
        load()
        torch.backends.cudnn.benchmark = True
        net, inputs = build(settings["model"], torch.device("cuda"))
        graphs, _buffer = capture(net, inputs, settings["batch"])
        barrier.wait(PHASE_TIMEOUT_S)
        warm_until = time.perf_counter() + 3.0  # clocks up before anything is measured
        while time.perf_counter() < warm_until:
            run_batch(graphs[settings["batch"]])
        times = {}
        for batch, graph in graphs.items():
            barrier.wait(PHASE_TIMEOUT_S)
            times[batch] = batch_times_ms(graph, settings["profile_runs"])
        results.put((index, "profile", times))
        rates_rps = orders.get(timeout=PHASE_TIMEOUT_S)
        for number, rate_rps in enumerate(rates_rps):
            barrier.wait(PHASE_TIMEOUT_S)
            rng = np.random.default_rng([settings["seed"], number, index])
            share_rps = rate_rps / settings["procs"]
            part = serve(graphs, settings["batch"], share_rps, settings["seconds"], settings["warmup_s"], rng)
            results.put((index, "level", part))
    except BaseException as error:  # the parent reports it and stops the others
        results.put((index, "error", f"{type(error).__name__}: {error}"))


def gather(results, workers: list, kind: str) -> list:
    """One `kind` answer from every process, in process order; exits naming the first that failed."""
    answers = {}
    while len(answers) < len(workers):
        try:
            index, got, value = results.get(timeout=PHASE_TIMEOUT_S)
        except queue.Empty:
            stop(workers)
            raise SystemExit(f"no {kind} from process {sorted(set(range(len(workers))) - set(answers))} "
                             f"within {PHASE_TIMEOUT_S} s")
        if got == "error":
            stop(workers)
            raise SystemExit(f"process {index} of {len(workers)} failed: {value}")
        answers[index] = value
    return [answers[index] for index in range(len(workers))]


def stop(workers: list) -> None:
    for process in workers:
        if process.is_alive():
            process.terminate()


def serve_segment(args, levels: list) -> dict:
    """The segment's --procs processes: profiled together, then every level served (empty with --profile-only)."""
    settings = {
        "model": args.model,
        "batch": args.batch,
        "procs": args.procs,
        "profile_runs": args.profile_runs,
        "seconds": args.seconds,
        "warmup_s": args.warmup_s,
        "seed": args.seed,
        "slo_ms": args.slo_ms,
    }
    context = multiprocessing.get_context("spawn")
    barrier = context.Barrier(args.procs)
    results = context.Queue()
    orders = [context.Queue() for _ in range(args.procs)]
    workers = [
        context.Process(target=worker, args=(index, settings, barrier, orders[index], results), daemon=True)
        for index in range(args.procs)
    ]
    for process in workers:
        process.start()
    rows = profile_rows(gather(results, workers, "profile"))
    full_rps = args.procs * args.batch * 1000.0 / rows[-1]["latency_ms"]
    if args.profile_only:
        rates_rps = []
    elif args.rate_rps is not None:
        rates_rps = [args.rate_rps]
    else:
        rates_rps = [u * full_rps for u in levels]
    for order in orders:
        order.put(rates_rps)
    served = []
    for rate_rps in rates_rps:
        level = level_summary(gather(results, workers, "level"), rate_rps, settings)
        level["utilisation"] = rate_rps / full_rps
        served.append(level)
        within = f", {100 * level['within_slo']:.2f}% within {args.slo_ms} ms" if "within_slo" in level else ""
        print(
            f"{args.model} b{args.batch} x{args.procs} at {level['utilisation']:.2f}: {level['arrived_rps']:.0f} req/s, "
            f"p50 {level['p50_ms']:.3f} ms, p99 {level['p99_ms']:.3f} ms{within}",
            file=sys.stderr,
            flush=True,
        )
    for process in workers:
        process.join(timeout=60)
    stop(workers)
    return {"profile": rows, "levels": served}


def write_profile_csv(path: str, args, rows: list) -> None:
    """Appends the profile as Tessera profile rows (a header first when the file is new or empty)."""
    new = not os.path.exists(path) or os.path.getsize(path) == 0
    with open(path, "a", newline="") as out:
        table = csv.writer(out)
        if new:
            table.writerow(
                ["gpu_model", "model", "size_gpcs", "batch", "procs", "throughput_rps", "latency_ms",
                 "latency_p50_ms", "latency_p99_ms"]
            )
        for row in rows:
            throughput_rps = args.procs * row["batch"] * 1000.0 / row["latency_ms"]
            table.writerow(
                [args.gpu_model, args.model, args.size_gpcs, row["batch"], args.procs, f"{throughput_rps:.3f}",
                 f"{row['latency_ms']:.6f}", f"{row['p50_ms']:.6f}", f"{row['p99_ms']:.6f}"]
            )


def serve_shared(members: list, seconds: float, warmup_s: float, rng) -> dict:
    """The serialized discipline: members' Poisson streams, one executor, the oldest waiting head first."""
    arrivals = []
    for member in members:
        gaps = rng.exponential(1.0 / member["rate_rps"], size=int(member["rate_rps"] * seconds * 1.2) + 100)
        times = np.cumsum(gaps)
        arrivals.append(times[times < seconds])
    done = [np.empty(len(times)) for times in arrivals]
    heads = [0] * len(members)
    busy_s = 0.0
    clock = time.perf_counter
    origin = clock()
    while True:
        now = clock() - origin
        waiting = [k for k, times in enumerate(arrivals) if heads[k] < len(times)]
        if not waiting:
            break
        ready = [k for k in waiting if arrivals[k][heads[k]] <= now]
        if not ready:
            due = min(arrivals[k][heads[k]] for k in waiting)
            while clock() - origin < due:
                pass
            continue
        k = min(ready, key=lambda k: arrivals[k][heads[k]])
        arrived = int(np.searchsorted(arrivals[k], now, side="right"))
        batch = min(arrived - heads[k], members[k]["batch"])
        started = clock()
        run_batch(members[k]["graphs"][batch])
        finished = clock()
        busy_s += finished - started
        done[k][heads[k] : heads[k] + batch] = finished - origin
        heads[k] += batch
    results = []
    for member, times, finished in zip(members, arrivals, done):
        counted = times >= warmup_s
        latency_ms = (finished - times)[counted] * 1000.0
        results.append(
            {
                "model": member["model"],
                "batch": member["batch"],
                "rate_rps": member["rate_rps"],
                "slo_ms": member["slo_ms"],
                "profile": member["profile"],
                "requests": int(counted.sum()),
                "p50_ms": float(np.percentile(latency_ms, 50)),
                "p99_ms": float(np.percentile(latency_ms, 99)),
                "within_slo": float((latency_ms <= member["slo_ms"]).mean()),
            }
        )
    return {"busy_share": busy_s / (clock() - origin), "members": results}


def parse_members(text: str) -> list:
    """MODEL:RATE_RPS:SLO_MS[:BATCH] entries, comma-separated."""
    members = []
    for entry in text.split(","):
        fields = entry.split(":")
        try:
            if len(fields) not in (3, 4):
                raise ValueError("expected MODEL:RATE_RPS:SLO_MS[:BATCH]")
            member = {"model": fields[0], "rate_rps": float(fields[1]), "slo_ms": float(fields[2])}
            member["batch"] = int(fields[3]) if len(fields) == 4 else 1
            if member["rate_rps"] <= 0 or member["slo_ms"] <= 0 or member["batch"] < 1:
                raise ValueError("rate, SLO and batch must be positive")
        except ValueError as error:
            raise SystemExit(f"--members entry {entry!r}: {error}")
        members.append(member)
    if len(members) < 2:
        raise SystemExit("--members needs at least two members (one is a dedicated instance: use --model)")
    return members


def main_shared(args, device) -> dict:
    members = parse_members(args.members)
    for member in members:
        net, inputs = build(member["model"], device)
        # The net and the input buffer stay alive with the graphs that read them.
        member["net"] = net
        member["graphs"], member["buffer"] = capture(net, inputs, member["batch"])
    warm_until = time.perf_counter() + 3.0
    while time.perf_counter() < warm_until:
        for member in members:
            run_batch(member["graphs"][member["batch"]])
    for member in members:
        member["profile"] = profile({member["batch"]: member["graphs"][member["batch"]]}, args.profile_runs)[0]
    served = serve_shared(members, args.seconds, args.warmup_s, np.random.default_rng(args.seed))
    for row in served["members"]:
        print(
            f"{row['model']} at {row['rate_rps']:.0f} req/s: p99 {row['p99_ms']:.2f} ms, "
            f"{100 * row['within_slo']:.2f}% within {row['slo_ms']:.0f} ms",
            file=sys.stderr,
            flush=True,
        )
    return {
        "gpu": gpu_facts(),
        "discipline": "serialized: one executor, one batch at a time, the member whose oldest request is oldest",
        "seconds": args.seconds,
        "warmup_s": args.warmup_s,
        "seed": args.seed,
        **served,
    }


def gpu_facts() -> dict:
    query = "name,driver_version,mig.mode.current,clocks.sm,clocks.max.sm,memory.total"
    try:
        line = subprocess.run(
            ["nvidia-smi", f"--query-gpu={query}", "--format=csv,noheader", "-i", "0"],
            capture_output=True,
            text=True,
            timeout=30,
        ).stdout.strip()
    except (OSError, subprocess.SubprocessError) as error:
        line = f"nvidia-smi failed: {error}"
    return {"nvidia_smi": line, "torch": torch.__version__, "device": torch.cuda.get_device_name(0)}


def arguments():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", default="resnet50")
    parser.add_argument("--batch", type=int, default=16, help="the largest batch a process runs")
    parser.add_argument("--procs", type=int, default=1, help="the segment's server processes (MPS processes)")
    parser.add_argument("--utilisation", default="0.5,0.8,0.95", help="offered load per level, of full-batch throughput")
    parser.add_argument("--rate-rps", type=float, help="serve one level at this rate instead (a plan's capacity)")
    parser.add_argument("--slo-ms", type=float, help="also count each level's share of requests within this latency")
    parser.add_argument("--profile-only", action="store_true", help="profile, serve nothing")
    parser.add_argument("--profile-csv", help="also append the profile to this Tessera profile CSV")
    parser.add_argument("--gpu-model", default="h200-141gb", help="the profile rows' GPU model (with --profile-csv)")
    parser.add_argument("--size-gpcs", type=int, default=7, help="the profile rows' instance size (the whole GPU: 7)")
    parser.add_argument("--seconds", type=float, default=30.0, help="arrivals per level")
    parser.add_argument("--warmup-s", type=float, default=3.0, help="requests arriving earlier are not counted")
    parser.add_argument("--profile-runs", type=int, default=200)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--output", help="JSON file (default: stdout)")
    parser.add_argument("--members", help="serve a shared instance instead: MODEL:RATE_RPS:SLO_MS[:BATCH],...")
    args = parser.parse_args()
    try:
        levels = [float(u) for u in args.utilisation.split(",")]
    except ValueError:
        parser.error(f"--utilisation {args.utilisation!r}: expected loads such as 0.5,0.8")
    if args.batch < 1 or args.procs < 1 or args.profile_runs < 1:
        parser.error("--batch, --procs and --profile-runs must be at least 1")
    if not all(0.0 < u < 1.0 for u in levels):
        parser.error(f"--utilisation {args.utilisation}: each load must be in (0, 1)")
    if args.seconds <= args.warmup_s or args.warmup_s < 0:
        parser.error("--seconds must be above --warmup-s, which must not be negative")
    for name, value in (("--rate-rps", args.rate_rps), ("--slo-ms", args.slo_ms)):
        if value is not None and not value > 0:
            parser.error(f"{name} {value}: must be positive")
    if not 1 <= args.size_gpcs <= 7:
        parser.error(f"--size-gpcs {args.size_gpcs}: an instance has 1 to 7 compute slices")
    return args, levels


def main() -> int:
    args, levels = arguments()
    load()
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible (check CUDA_VISIBLE_DEVICES)")
    torch.backends.cudnn.benchmark = True
    if args.members:
        write(main_shared(args, torch.device("cuda")), args.output)
        return 0
    served = serve_segment(args, levels)
    if args.profile_csv:
        write_profile_csv(args.profile_csv, args, served["profile"])
    result = {
        "gpu": gpu_facts(),
        "model": args.model,
        "max_batch": args.batch,
        "procs": args.procs,
        "discipline": "a FIFO queue per process, requests routed to processes at random; "
        "a free process takes up to max_batch waiting requests",
        "seconds": args.seconds,
        "warmup_s": args.warmup_s,
        "seed": args.seed,
        **served,
    }
    if args.rate_rps is not None:
        result["planned_capacity_rps"] = args.rate_rps
    if args.slo_ms is not None:
        result["slo_ms"] = args.slo_ms
    write(result, args.output)
    return 0


def write(result: dict, output) -> None:
    text = json.dumps(result, indent=1)
    if output:
        with open(output, "w") as out:
            out.write(text + "\n")
    else:
        print(text)


if __name__ == "__main__":
    sys.exit(main())
