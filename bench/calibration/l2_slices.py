#!/usr/bin/env python3
"""Calibration for issue 4 at M = 512..2048: can dequantize + cuBLAS keep its bf16 weights in L2?

Today's dequantize + cuBLAS path writes the whole bf16 W to HBM (126 MB for glm47 q) and cuBLAS
reads it back. The idea (NOTES, sixty-fourth session): dequantize W in slices of N rows into an
L2-sized workspace and run each slice's GEMM (y^T[rows] = W[rows] x^T) while the next slice is
being written into a second workspace, so the bf16 weights never leave L2. This script measures,
with PyTorch's cuBLAS and no kbit code, what that schedule could cost at best:

  full        y^T = W x^T with W rotated across buffers larger than 3x L2 (the cold bf16 baseline)
  slices      the same GEMM in row slices from one L2-resident workspace (the GEMM side alone)
  expand      a stand-in dequantize: uint8 -> bf16 copy of every slice (reads 1 byte per weight,
              more than k <= 5 reads), into the two alternating workspaces, nothing else
  serial      expand then GEMM per slice, one stream
  overlapped  expand of slice i + 1 on a second stream beside the GEMM of slice i

Each figure is the median over repeats of a CUDA graph holding 8 calls (one per rotated buffer).
Run: python3 bench/calibration/l2_slices.py [--m 512,2048] [--slice-rows 1024,2048,4096]
"""
import argparse
import json
import statistics

import torch

SHAPES = {"glm47.q": (12288, 5120), "glm47.o": (5120, 12288), "glm47.shared_gu": (24576, 5120)}


def graph_time_us(fn, calls, repeats, replays=5):
    """Median per call of a CUDA graph that runs fn(i) for i in range(calls)."""
    stream = torch.cuda.Stream()
    stream.wait_stream(torch.cuda.current_stream())
    with torch.cuda.stream(stream):
        for i in range(calls):  # warm-up (cuBLAS workspace, handles) outside the capture
            fn(i)
    torch.cuda.current_stream().wait_stream(stream)
    torch.cuda.synchronize()
    graph = torch.cuda.CUDAGraph()
    with torch.cuda.graph(graph):
        for i in range(calls):
            fn(i)
    samples = []
    for _ in range(repeats):
        start, stop = torch.cuda.Event(enable_timing=True), torch.cuda.Event(enable_timing=True)
        start.record()
        for _ in range(replays):
            graph.replay()
        stop.record()
        torch.cuda.synchronize()
        samples.append(start.elapsed_time(stop) * 1000.0 / (replays * calls))
    return statistics.median(samples)


def main():
    parser = argparse.ArgumentParser()
    parser.add_argument("--m", default="512,2048")
    parser.add_argument("--slice-rows", default="1024,2048,3072,4096")
    parser.add_argument("--shapes", default=",".join(SHAPES))
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--json", default="")
    args = parser.parse_args()
    dev = torch.device("cuda")
    l2 = torch.cuda.get_device_properties(dev).L2_cache_size
    print(f"# {torch.cuda.get_device_name(dev)}, L2 {l2 / 2**20:.0f} MiB, torch {torch.__version__}")
    rows_out = []
    for shape in args.shapes.split(","):
        n, k = SHAPES[shape]
        calls = 8
        weights = [torch.randn(n, k, device=dev, dtype=torch.bfloat16) for _ in range(max(calls, 1))]
        packed = [torch.randint(0, 255, (n, k), device=dev, dtype=torch.uint8) for _ in range(calls)]
        assert calls * n * k >= 3 * l2, "the rotated uint8 sources must exceed 3x L2"
        for m in map(int, args.m.split(",")):
            x = torch.randn(m, k, device=dev, dtype=torch.bfloat16)
            yt = torch.empty(n, m, device=dev, dtype=torch.bfloat16)
            full = graph_time_us(lambda i: torch.mm(weights[i % len(weights)], x.t(), out=yt), calls, args.repeats)
            print(f"{shape} M={m}: full (cold W) {full:.2f} us")
            for rows in map(int, args.slice_rows.split(",")):
                if rows >= n:
                    continue
                bounds = [(r0, min(r0 + rows, n)) for r0 in range(0, n, rows)]
                work = [torch.empty(rows, k, device=dev, dtype=torch.bfloat16) for _ in range(2)]
                side = torch.cuda.Stream()

                def gemm_only(i):
                    for s, (r0, r1) in enumerate(bounds):
                        torch.mm(work[s % 2][: r1 - r0], x.t(), out=yt[r0:r1])

                def expand_only(i):
                    for s, (r0, r1) in enumerate(bounds):
                        work[s % 2][: r1 - r0].copy_(packed[i][r0:r1])

                def serial(i):
                    for s, (r0, r1) in enumerate(bounds):
                        work[s % 2][: r1 - r0].copy_(packed[i][r0:r1])
                        torch.mm(work[s % 2][: r1 - r0], x.t(), out=yt[r0:r1])

                def overlapped(i):
                    main = torch.cuda.current_stream()
                    ready = [torch.cuda.Event() for _ in bounds]
                    done = [torch.cuda.Event() for _ in bounds]
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        work[0][: bounds[0][1]].copy_(packed[i][: bounds[0][1]])
                        ready[0].record(side)
                    for s, (r0, r1) in enumerate(bounds):
                        if s + 1 < len(bounds):
                            q0, q1 = bounds[s + 1]
                            with torch.cuda.stream(side):
                                if s >= 1:
                                    side.wait_event(done[s - 1])  # workspace (s + 1) % 2 is free again
                                work[(s + 1) % 2][: q1 - q0].copy_(packed[i][q0:q1])
                                ready[s + 1].record(side)
                        main.wait_event(ready[s])
                        torch.mm(work[s % 2][: r1 - r0], x.t(), out=yt[r0:r1])
                        done[s].record(main)
                    main.wait_stream(side)

                times = {name: graph_time_us(fn, calls, args.repeats)
                         for name, fn in (("slices", gemm_only), ("expand", expand_only), ("serial", serial),
                                          ("overlapped", overlapped))}
                print(f"  rows {rows:5d} ({rows * k * 2 / 2**20:.0f} MiB per workspace): "
                      + ", ".join(f"{name} {t:.2f}" for name, t in times.items())
                      + f" us; overlapped / full {times['overlapped'] / full:.3f}")
                rows_out.append({"shape": shape, "m": m, "n": n, "k": k, "slice_rows": rows, "full_us": full,
                                 **{f"{name}_us": t for name, t in times.items()}})
            del x, yt
        del weights, packed
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            for row in rows_out:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
