#!/usr/bin/env python3
"""A small PyTorch inference workload for Tessera's profiling commands.

It runs batches of a small model on the one GPU it sees (set
CUDA_VISIBLE_DEVICES to a GPU index or a MIG UUID) until it is terminated
or --seconds pass, and prints its throughput the way Tessera reads it:

    tessera:throughput=<samples per second>

once a second and once more when it stops (SIGTERM or SIGINT), followed by
the spread of its batch times (each batch timed from its launch to its
synchronisation), which `tessera profile` records beside the mean:

    tessera:latency_p50_ms=<median ms>
    tessera:latency_p99_ms=<99th percentile ms>

Warm-up batches are not counted. Register it with, for example:

    tessera workload add mlp-b32 --family mlp --task inference --batch 32 \
        --command "python3 examples/workloads/torch_infer.py --model mlp --batch {batch}"
"""

import argparse
import signal
import sys
import time

import torch


def build(model: str) -> torch.nn.Module:
    if model == "mlp":
        return torch.nn.Sequential(
            torch.nn.Linear(1024, 4096),
            torch.nn.ReLU(),
            torch.nn.Linear(4096, 4096),
            torch.nn.ReLU(),
            torch.nn.Linear(4096, 1000),
        )
    if model == "conv":
        return torch.nn.Sequential(
            torch.nn.Conv2d(3, 64, 3, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(64, 128, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.Conv2d(128, 256, 3, stride=2, padding=1),
            torch.nn.ReLU(),
            torch.nn.AdaptiveAvgPool2d(1),
            torch.nn.Flatten(),
            torch.nn.Linear(256, 1000),
        )
    raise SystemExit(f"unknown model {model!r}: use mlp or conv")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--model", choices=["mlp", "conv"], default="mlp")
    parser.add_argument("--batch", type=int, required=True, help="samples per batch")
    parser.add_argument("--seconds", type=float, default=0.0, help="stop after this long (0: run until terminated)")
    parser.add_argument("--warmup-batches", type=int, default=20)
    args = parser.parse_args()
    if args.batch < 1:
        raise SystemExit("--batch must be at least 1")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible (check CUDA_VISIBLE_DEVICES)")

    stop = False

    def request_stop(signum, frame):
        nonlocal stop
        stop = True

    signal.signal(signal.SIGTERM, request_stop)
    signal.signal(signal.SIGINT, request_stop)

    device = torch.device("cuda")
    model = build(args.model).to(device).half().eval()
    shape = (args.batch, 1024) if args.model == "mlp" else (args.batch, 3, 64, 64)
    inputs = torch.randn(shape, device=device, dtype=torch.half)

    with torch.inference_mode():
        for _ in range(args.warmup_batches):
            model(inputs)
        torch.cuda.synchronize()
        started = last_report = time.perf_counter()
        samples = 0
        batch_ms = []
        while not stop:
            launched = time.perf_counter()
            model(inputs)
            torch.cuda.synchronize()
            samples += args.batch
            now = time.perf_counter()
            batch_ms.append((now - launched) * 1000.0)
            if now - last_report >= 1.0:
                print(f"tessera:throughput={samples / (now - started):.3f}", flush=True)
                last_report = now
            if args.seconds and now - started >= args.seconds:
                break
    elapsed = time.perf_counter() - started
    if samples:
        print(f"tessera:throughput={samples / elapsed:.3f}", flush=True)
        batch_ms.sort()
        percentile = lambda p: batch_ms[min(len(batch_ms) - 1, int(p / 100.0 * len(batch_ms)))]
        print(f"tessera:latency_p50_ms={percentile(50):.6f}", flush=True)
        print(f"tessera:latency_p99_ms={percentile(99):.6f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
