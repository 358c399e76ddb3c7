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

Slices are of N rows (--slice-rows: each slice's GEMM has fewer output tiles) or of K columns
(--slice-cols: every GEMM covers all of y, accumulating with beta = 1; y in bf16 here, where a
real kernel would accumulate in fp32).

Each figure is the median over repeats of a CUDA graph holding 8 calls (one per rotated buffer).
Run: python3 bench/calibration/l2_slices.py [--m 512,2048] [--slice-rows 1024,2048,4096] [--slice-cols 512,1024]
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
    parser.add_argument("--slice-rows", default="1024,2048,4096")
    parser.add_argument("--slice-cols", default="512,1024")
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
            side = torch.cuda.Stream()
            plans = [("rows", r) for r in map(int, args.slice_rows.split(",")) if r < n]
            plans += [("cols", c) for c in map(int, args.slice_cols.split(",")) if c < k]
            for kind, width in plans:
                # rows: y^T[r0:r1] = W[r0:r1] x^T per slice; cols: y^T += W[:, c0:c1] x[:, c0:c1]^T (beta = 1)
                extent = n if kind == "rows" else k
                bounds = [(a, min(a + width, extent)) for a in range(0, extent, width)]
                shape_of = (lambda a, b: (b - a, k)) if kind == "rows" else (lambda a, b: (n, b - a))
                work = [torch.empty(shape_of(0, width), device=dev, dtype=torch.bfloat16) for _ in range(2)]

                def slot(s):  # slice s's part of its workspace
                    a, b = bounds[s]
                    return work[s % 2][: b - a] if kind == "rows" else work[s % 2][:, : b - a]

                def expand(i, s):
                    a, b = bounds[s]
                    slot(s).copy_(packed[i][a:b] if kind == "rows" else packed[i][:, a:b])

                def gemm(s):
                    a, b = bounds[s]
                    if kind == "rows":
                        torch.mm(slot(s), x.t(), out=yt[a:b])
                    elif s == 0:
                        torch.mm(slot(s), x[:, a:b].t(), out=yt)
                    else:
                        yt.addmm_(slot(s), x[:, a:b].t())

                def gemm_only(i):
                    for s in range(len(bounds)):
                        gemm(s)

                def expand_only(i):
                    for s in range(len(bounds)):
                        expand(i, s)

                def serial(i):
                    for s in range(len(bounds)):
                        expand(i, s)
                        gemm(s)

                def overlapped(i):
                    main = torch.cuda.current_stream()
                    ready = [torch.cuda.Event() for _ in bounds]
                    done = [torch.cuda.Event() for _ in bounds]
                    side.wait_stream(main)
                    with torch.cuda.stream(side):
                        expand(i, 0)
                        ready[0].record(side)
                    for s in range(len(bounds)):
                        if s + 1 < len(bounds):
                            with torch.cuda.stream(side):
                                if s >= 1:
                                    side.wait_event(done[s - 1])  # workspace (s + 1) % 2 is free again
                                expand(i, s + 1)
                                ready[s + 1].record(side)
                        main.wait_event(ready[s])
                        gemm(s)
                        done[s].record(main)
                    main.wait_stream(side)

                times = {name: graph_time_us(fn, calls, args.repeats)
                         for name, fn in (("slices", gemm_only), ("expand", expand_only), ("serial", serial),
                                          ("overlapped", overlapped))}
                mib = work[0].numel() * 2 / 2**20
                print(f"  {kind} {width:5d} ({mib:.0f} MiB per workspace): "
                      + ", ".join(f"{name} {t:.2f}" for name, t in times.items())
                      + f" us; overlapped / full {times['overlapped'] / full:.3f}")
                rows_out.append({"shape": shape, "m": m, "n": n, "k": k, "slice": kind, "width": width,
                                 "full_us": full, **{f"{name}_us": t for name, t in times.items()}})
                del work
            del x, yt
        del weights, packed
        torch.cuda.empty_cache()
    if args.json:
        with open(args.json, "w") as f:
            for row in rows_out:
                f.write(json.dumps(row) + "\n")


if __name__ == "__main__":
    main()
