#!/usr/bin/env python3
"""Runs a simulated oversubscription schedule on a real GPU for Tessera.

`tessera simulate run` writes an execution plan (JSON) on standard input:
every host-to-device copy, write-back, compute and free of the simulated
run, in the order the simulation started them, each with how many commands
of each stream must have ended before it starts (`after`). This program:

- caps device memory at the plan's `memory_bytes` plus a small headroom for
  the allocator's rounding (PyTorch's allocator is limited to that fraction
  of the card, so the oversubscription is real; TESSERA_EXECUTOR_HEADROOM_MB,
  default 512, sets the headroom);
- keeps each buffer in pinned host memory and copies it in and out on its
  own CUDA stream per direction, in the plan's order;
- runs one kernel per compute on a third stream, of the plan's duration
  (a spin kernel calibrated once against CUDA events), holding its scratch;
- makes each command wait (CUDA events) for the ends the plan lists;

then prints one line, last:

    tessera:execution={"makespan_ms": …, "compute_ms": …, "h2d_ms": …, "d2h_ms": …}

measured with CUDA events (makespan: first start to last end; the others:
the sum of each stream's command times). Errors go to stderr, exit status 1.
"""

import json
import os
import sys

import torch

PREFIX = "tessera:execution="


def calibrate(stream):
    """Spin cycles per millisecond of torch.cuda._sleep on this GPU."""
    cycles = 1_000_000
    with torch.cuda.stream(stream):
        torch.cuda._sleep(cycles)  # warm-up
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record(stream)
        torch.cuda._sleep(cycles * 20)
        end.record(stream)
    end.synchronize()
    return cycles * 20 / start.elapsed_time(end)


def allocate(nbytes: int, device, waits) -> torch.Tensor:
    """`nbytes` of device memory for one command. The host enqueues ahead of
    the GPU, so memory the plan has freed by now may still be held by a copy
    not yet ended (a write-back's chunks are released when it ends). When the
    allocator refuses, wait for the ends this command waits for anyway, then
    for all the work enqueued, and try again each time."""
    for wait in (lambda: None, lambda: [event.synchronize() for event in waits], torch.cuda.synchronize):
        wait()
        try:
            return torch.empty(nbytes, dtype=torch.uint8, device=device)
        except torch.OutOfMemoryError:
            pass
    raise torch.OutOfMemoryError(f"{nbytes} bytes")


def copy_in(host: torch.Tensor, nbytes: int, device, waits) -> torch.Tensor:
    """A chunk of `nbytes` on the device, filled from `host` (enqueued)."""
    chunk = allocate(nbytes, device, waits)
    chunk.copy_(host[:nbytes], non_blocking=True)
    return chunk


def write_back(chunks: list, host: torch.Tensor, stream) -> None:
    """Copies `chunks` into `host` (enqueued); their memory is free once the
    copies on `stream` have ended."""
    offset = 0
    for chunk in chunks:
        host[offset : offset + chunk.numel()].copy_(chunk, non_blocking=True)
        chunk.record_stream(stream)
        offset += chunk.numel()


def run_kernel(nbytes: int, cycles: int, device, waits) -> None:
    """A spin kernel of `cycles` holding `nbytes` of scratch (enqueued)."""
    scratch = allocate(nbytes, device, waits)
    torch.cuda._sleep(cycles)
    del scratch


def main() -> int:
    plan = json.load(sys.stdin)
    if plan.get("version") != 1:
        raise SystemExit(f"execution plan version {plan.get('version')!r}; this program reads version 1")
    if not torch.cuda.is_available():
        raise SystemExit("no CUDA device visible (check CUDA_VISIBLE_DEVICES)")
    # The allocator cap needs an indexed device.
    device = torch.device("cuda", torch.cuda.current_device())
    total = torch.cuda.get_device_properties(device).total_memory
    cap = plan["memory_bytes"] + int(os.environ.get("TESSERA_EXECUTOR_HEADROOM_MB", "512")) * 2**20
    if cap >= total:
        raise SystemExit(f"the trace's memory and headroom ({cap} bytes) are not below the card's ({total} bytes)")
    torch.cuda.set_per_process_memory_fraction(cap / total, device)

    streams = {"h2d": torch.cuda.Stream(), "d2h": torch.cuda.Stream(), "compute": torch.cuda.Stream()}
    cycles_per_ms = calibrate(streams["compute"])
    host = {}  # label -> pinned host bytes (largest copy seen)
    for command in plan["commands"]:
        if command["kind"] in ("h2d", "d2h") and command["bytes"] > host.get(command["label"], torch.empty(0)).numel():
            host[command["label"]] = torch.empty(command["bytes"], dtype=torch.uint8, pin_memory=True)

    ends = {"h2d": [], "d2h": [], "compute": []}
    times = {"h2d": [], "d2h": [], "compute": []}
    resident = {}  # label -> device tensors (chunks)
    origin = torch.cuda.Event(enable_timing=True)
    origin.record(streams["h2d"])
    for stream in ("d2h", "compute"):
        streams[stream].wait_event(origin)
    for index, command in enumerate(plan["commands"]):
        kind, label = command["kind"], command["label"]
        waits = [ends[s][command["after"][s] - 1] for s in ends if command["after"][s] > 0]
        if kind == "free":
            # Its chunks were allocated on the host-to-device stream, and
            # every later copy waits for the computes that had ended by this
            # free (the plan's `after`), so the allocator may hand the memory
            # to the next copy on that stream in stream order.
            resident.pop(label, None)
            continue
        stream = streams[kind]
        for event in waits:
            stream.wait_event(event)
        start, end = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        with torch.cuda.stream(stream):
            start.record(stream)
            try:
                # Each kind runs in a function of its own, so that no local
                # of this loop keeps a buffer's memory alive past its free.
                if kind == "h2d":
                    resident.setdefault(label, []).append(copy_in(host[label], command["bytes"], device, waits))
                elif kind == "d2h":
                    write_back(resident.pop(label, []), host[label], stream)
                else:
                    run_kernel(command["bytes"], int(command["compute_ms"] * cycles_per_ms), device, waits)
            except torch.OutOfMemoryError:
                raise SystemExit(f"command {index} ({kind} {label}): CUDA out of memory under the cap of {cap} bytes")
            end.record(stream)
        ends[kind].append(end)
        times[kind].append((start, end))
    torch.cuda.synchronize()
    all_times = [t for stream in times.values() for t in stream]
    makespan = max(origin.elapsed_time(end) for _, end in all_times) if all_times else 0.0
    busy = {s: sum(start.elapsed_time(end) for start, end in times[s]) for s in times}
    totals = {"makespan_ms": makespan, "compute_ms": busy["compute"], "h2d_ms": busy["h2d"], "d2h_ms": busy["d2h"]}
    print(PREFIX + json.dumps(totals), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
