#!/usr/bin/env python3
"""Summaries of the operand-dequantize A/B runs (bench/results/ab-*-session70/71.sh, verify-*-session71.sh).

ab_summary.py forced DIR VARIANTS: rows of DIR/ab_<variant>_<round>.jsonl (kbit_dequant_cublas forced), each
variant's mean over rounds against variant 'a', and geomeans by (M, k = 2 or not, small W or not).
ab_summary.py vs-cublas DIR VARIANTS: rows of DIR/v_<variant>_<round>.jsonl (cublas_bf16 and kbit_linear), kbit's
speed-up over cuBLAS bf16 per variant (cuBLAS rows carry bits = 0: matched by (shape, M)) and the rows under 0.9x.
ab_summary.py pair DIR BO (B, O: one-letter variant names): rows of DIR/ab*_<variant>_<round>.jsonl, `kbit bench` rows
(every kbit backend) and `kbit bench moe` rows alike, variant O's mean over rounds against B's per (backend, shape, M or
T, k), and geomeans by (M or T, k) (session 74's A/B scripts); moe rows are keyed by model and projection.
ab_summary.py pair DIR BO timing-only: the same, keeping rows that the bench marked invalid (timing-only variants,
whose results are wrong by design).
"""
import glob
import json
import statistics as st
import sys

# Qwen3's 512 x 2048, 2048 x 512 and 1024 x 2048 class: the shapes with one unit per warp.
SMALL = ('k', 'v', 'shared_dn', 'moe_dn', 'shared_gu', 'moe_gu')


def rows(pattern):
    for f in glob.glob(pattern):
        variant = f.split('/')[-1].split('_')[1]
        for line in open(f):
            r = json.loads(line)
            yield variant, r['shape'].split('.')[-1], r


def forced(out, variants):
    t = {}
    for v, s, r in rows(out + '/ab_*_*.jsonl'):
        if r['backend'] == 'kbit_dequant_cublas':
            t.setdefault((s, r['m'], r['bits']), {}).setdefault(v, []).append(r['median_us'])
    rat = {}
    for (s, m, k), d in sorted(t.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
        if 'a' not in d:
            continue
        a = st.mean(d['a'])
        line = f"{s:9s} M={m:4d} k={k} a {a:6.2f}"
        for v in variants:
            if v in d:
                x = st.mean(d[v])
                rat.setdefault((m, k == 2, s in SMALL, v), []).append(x / a)
                line += f" {v} {x:6.2f} ({x / a:.3f})"
        print(line)
    for (m, k2, small, v), r in sorted(rat.items()):
        print(f"M={m} {'k=2' if k2 else 'k>=3'} {'small' if small else 'large'} {v}/a "
              f"{st.geometric_mean(r):.4f} ({min(r):.3f}-{max(r):.3f})")


def vs_cublas(out, variants):
    t, cb = {}, {}
    for v, s, r in rows(out + '/v_*_*.jsonl'):
        if r['backend'] == 'cublas_bf16':
            cb.setdefault((s, r['m']), {}).setdefault(v, []).append(r['median_us'])
        else:
            t.setdefault((s, r['m'], r['bits']), {}).setdefault(v, []).append(r['median_us'])
    short = {v: 0 for v in variants}
    for key, d in sorted(t.items(), key=lambda x: (x[0][1], x[0][2], x[0][0])):
        line = f"{key[0]:9s} M={key[1]:4d} k={key[2]}"
        for v in variants:
            c, k = cb.get((key[0], key[1]), {}).get(v), d.get(v)
            if not c or not k:
                continue
            x = st.mean(c) / st.mean(k)
            line += (f"  {v}: cublas {st.mean(c):7.2f} kbit {st.mean(k):7.2f} "
                     f"({'/'.join(f'{z:.2f}' for z in k)}) x{x:.3f}")
            short[v] += x < 0.9
        if 'a' in d and 'b' in d:
            line += f"  b/a {st.mean(d['b']) / st.mean(d['a']):.3f}"
        print(line)
    print('rows under 0.9x:', short)


def pair(out, variants, timing_only=False):
    base, other = variants[0], variants[1]
    t = {}
    for f in glob.glob(out + '/ab*_*_*.jsonl'):
        v = f.split('/')[-1].split('_')[1]
        for line in open(f):
            r = json.loads(line)
            us = r.get('median_us', r.get('kbit_expert_linear_us'))  # kbit bench / kbit bench moe
            if us is None or not (timing_only or r.get('valid', True)) or r.get('backend', 'kbit').startswith('cublas'):
                continue
            shape = r.get('shape') or f"{r.get('model')}.{r.get('projection')}"  # moe rows: both models share names
            key = (r.get('backend', 'expert_linear'), shape, r.get('m', r.get('tokens')), r.get('bits'))
            t.setdefault(key, {}).setdefault(v, []).append(us)
    rat = {}
    for key, d in sorted(t.items(), key=str):
        if base in d and other in d:
            b, x = st.mean(d[base]), st.mean(d[other])
            print(f"{key[0]:14s} {str(key[1]):28s} M/T={key[2]} k={key[3]} {base} {b:8.2f} {other} {x:8.2f} "
                  f"ratio {x / b:.3f}")
            rat.setdefault((key[2], key[3]), []).append(x / b)
    for key, r in sorted(rat.items(), key=str):
        print(f"M/T={key[0]} k={key[1]} geomean {other}/{base} {st.geometric_mean(r):.3f} over {len(r)}")


if __name__ == '__main__':
    mode, out, variants = sys.argv[1], sys.argv[2], sys.argv[3]
    if sys.argv[4:] not in ([], ['timing-only']) or (sys.argv[4:] and mode != 'pair'):
        sys.exit(f'ab_summary.py: unknown arguments {sys.argv[4:]} (only `pair DIR BO timing-only` takes a fourth)')
    if mode == 'pair':
        pair(out, variants, timing_only=sys.argv[4:] == ['timing-only'])
    else:
        {'forced': forced, 'vs-cublas': vs_cublas}[mode](out, variants)
