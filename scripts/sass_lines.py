#!/usr/bin/env python3
"""Where a kernel's machine code sits, without a disassembler.

A cubin built with -lineinfo carries two DWARF line tables: .debug_line (SASS address ->
source line) and .nv_debug_line_sass (SASS address -> line of the PTX kept in
.nv_debug_ptx_txt). This script reads both (readelf stops at NVIDIA's inlined-at opcodes)
and prints, per kernel, the SASS address ranges of chosen source lines, the PTX
instruction behind every 16-byte SASS slot in a range, and where local memory is used.
Use: the code layout of a hot loop (is it contiguous, how many bytes does it span),
instruction mixes per region, where a spill sits, on a machine without cuobjdump /
nvdisasm. A slot counts for a line when the line, or a call site it is inlined at, is in
the range (NVIDIA's extended opcode 0x90 gives a row's inlined-at row and function).

  nvcc ... -lineinfo -cubin -o x.cubin file.cu
  scripts/sass_lines.py x.cubin --kernel 'gemv_kernelILi4E13__nv_bfloat16Li1ELb0E' \\
      --lines 860-896 [--minus FROM-TO] [--ptx-mix] [--local] [--dump FROM-TO]
"""
import argparse
import collections
import re
import struct
import sys


def read_elf(path):
    data = open(path, "rb").read()
    assert data[:4] == b"\x7fELF" and data[4] == 2, "a 64-bit ELF (cubin) is expected"
    shoff, = struct.unpack_from("<Q", data, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", data, 0x3A)
    secs = []
    for i in range(shnum):
        name, typ, flags, addr, off, size, link, info, align, entsize = struct.unpack_from(
            "<IIQQQQIIQQ", data, shoff + i * shentsize)
        secs.append(dict(name_off=name, type=typ, off=off, size=size, link=link, info=info, entsize=entsize))
    strtab = secs[shstrndx]
    for s in secs:
        start = strtab["off"] + s["name_off"]
        s["name"] = data[start:data.index(b"\0", start)].decode()
        s["data"] = data[s["off"]:s["off"] + s["size"]] if s["type"] != 8 else b""
    return secs


def symbols(secs):
    symtab = next(s for s in secs if s["name"] == ".symtab")
    strtab = secs[symtab["link"]]["data"]
    out = []
    for i in range(len(symtab["data"]) // 24):
        name, info, other, shndx, value, size = struct.unpack_from("<IBBHQQ", symtab["data"], i * 24)
        out.append(dict(name=strtab[name:strtab.index(b"\0", name)].decode(), shndx=shndx, value=value, size=size))
    return out


def relocations(secs, target_name, syms):
    """offset in the target section -> symbol name (the set_address operands of the line programs)."""
    rel = {}
    for s in secs:
        if s["name"] == ".rela" + target_name:
            for i in range(len(s["data"]) // 24):
                off, info, addend = struct.unpack_from("<QQq", s["data"], i * 24)
                rel[off] = syms[info >> 32]["name"]
    return rel


def leb128(buf, pos, signed=False):
    result = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        result |= (b & 0x7F) << shift
        shift += 7
        if b < 0x80:
            if signed and b & 0x40:
                result -= 1 << shift
            return result, pos


def uleb(buf, pos):
    return leb128(buf, pos)


def sleb(buf, pos):
    return leb128(buf, pos, signed=True)


def line_programs(buf, rel):
    """Yields (function symbol, [(address, file, line)]) per sequence of every unit."""
    pos = 0
    while pos < len(buf):
        unit_length, = struct.unpack_from("<I", buf, pos)
        unit_end = pos + 4 + unit_length
        version, header_length = struct.unpack_from("<HI", buf, pos + 4)
        p = pos + 10
        program = p + header_length
        min_inst = buf[p]
        p += 1
        if version >= 4:
            p += 1
        default_is_stmt = buf[p]
        line_base = struct.unpack_from("<b", buf, p + 1)[0]
        line_range = buf[p + 2]
        opcode_base = buf[p + 3]
        lengths = list(buf[p + 4:p + 4 + opcode_base - 1])
        p = program
        rows = []
        address, file, line, symbol, inlined_at = 0, 1, 1, None, None
        while p < unit_end:
            op = buf[p]
            p += 1
            if op >= opcode_base:
                adj = op - opcode_base
                address += (adj // line_range) * min_inst
                line += line_base + adj % line_range
                rows.append((address, file, line, inlined_at))
            elif op == 0:
                length, p = uleb(buf, p)
                sub = buf[p]
                if sub == 1:  # end_sequence
                    yield symbol, rows
                    rows, address, file, line, symbol, inlined_at = [], 0, 1, 1, None, None
                elif sub == 2:  # set_address (relocated against the function's section)
                    symbol = rel.get(p + 1, symbol)
                    address, = struct.unpack_from("<Q", buf, p + 1) if length == 9 else (0,)
                elif sub == 0x90:  # NVIDIA: the next rows are inlined at row A, in the function named at B
                    at, q = uleb(buf, p + 1)
                    fn, q = uleb(buf, q)
                    inlined_at = (at, fn) if (at or fn) else None
                p += length  # others: skipped
            elif op == 1:
                rows.append((address, file, line, inlined_at))
            elif op == 2:
                adv, p = uleb(buf, p)
                address += adv * min_inst
            elif op == 3:
                adv, p = sleb(buf, p)
                line += adv
            elif op == 4:
                file, p = uleb(buf, p)
            elif op == 8:
                address += ((255 - opcode_base) // line_range) * min_inst
            elif op == 9:
                adv, = struct.unpack_from("<H", buf, p)
                p += 2
                address += adv
            else:
                for _ in range(lengths[op - 1]):
                    _, p = uleb(buf, p)
        pos = unit_end


def per_slot(rows, size):
    """SASS byte address (16-byte slots) -> row index (each row holds until the next address)."""
    order = sorted(range(len(rows)), key=lambda i: (rows[i][0], i))
    out = {}
    for n, i in enumerate(order):
        end = rows[order[n + 1]][0] if n + 1 < len(order) else size
        for a in range(rows[i][0], end, 16):
            out[a] = i
    return out


def chain(rows, i):
    """The (file, line) of row i, then of the rows it is inlined at (row indices count from 1)."""
    out = []
    while i is not None and 0 <= i < len(rows) and len(out) < 64:
        address, file, line, inlined_at = rows[i]
        out.append((file, line))
        i = inlined_at[0] - 1 if inlined_at else None
    return out


def ranges(addresses):
    out = []
    for a in sorted(addresses):
        if out and a == out[-1][1]:
            out[-1][1] = a + 16
        else:
            out.append([a, a + 16])
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("cubin")
    ap.add_argument("--kernel", default="", help="a regular expression on the mangled kernel names")
    ap.add_argument("--lines", help="source lines FROM-TO: slots whose line or call sites fall there")
    ap.add_argument("--minus", help="source lines FROM-TO taken out of --lines' set (e.g. a call inside the loop)")
    ap.add_argument("--file", type=int, default=1, help="their file's index in the line table (1: the first)")
    ap.add_argument("--ptx-mix", action="store_true", help="PTX opcodes behind the chosen lines' SASS slots")
    ap.add_argument("--local", action="store_true",
                    help="where the local-memory stores / loads are (spills, stack arrays): SASS opcodes 0x387 / 0x983 "
                         "(the low 12 bits, as seen on sm_90a with nvcc 13.0 at the lines of a known stack array)")
    ap.add_argument("--dump", help="SASS byte range FROM-TO (hex or decimal): source line and PTX per slot")
    args = ap.parse_args()

    secs = read_elf(args.cubin)
    syms = symbols(secs)
    by_name = {s["name"]: s for s in secs}
    text_size = {s["name"][len(".text."):]: s["size"] for s in secs if s["name"].startswith(".text.")}
    src = {sym: rows for sym, rows in line_programs(by_name[".debug_line"]["data"],
                                                     relocations(secs, ".debug_line", syms)) if sym in text_size}
    ptx_lines = by_name[".nv_debug_ptx_txt"]["data"].decode(errors="replace").split("\0") \
        if ".nv_debug_ptx_txt" in by_name else []
    ptx = {}
    if ".nv_debug_line_sass" in by_name:
        rel = relocations(secs, ".nv_debug_line_sass", syms)
        for sym, rows in line_programs(by_name[".nv_debug_line_sass"]["data"], rel):
            if sym in text_size:
                ptx[sym] = {a: rows[i][2] for a, i in per_slot(rows, text_size[sym]).items()}

    lo = hi = None
    if args.lines:
        lo, hi = (int(v) for v in args.lines.split("-"))
    mlo = mhi = None
    if args.minus:
        mlo, mhi = (int(v) for v in args.minus.split("-"))
    for sym in sorted(text_size):
        if not re.search(args.kernel, sym):
            continue
        size = text_size[sym]
        print(f"{sym}: {size} bytes, {size // 16} instruction slots")
        rows = src.get(sym, [])
        slot_rows = per_slot(rows, size)

        def on_lines(a, first, last):  # slot a's line, or a call site it is inlined at, in [first, last]
            return first is not None and any(f == args.file and first <= l <= last for f, l in chain(rows, slot_rows[a]))

        def where(a):  # slot a's line < the lines it is inlined at
            return " < ".join(str(l) for f, l in chain(rows, slot_rows[a])) if a in slot_rows else "-"

        chosen = [a for a in slot_rows if on_lines(a, lo, hi) and not on_lines(a, mlo, mhi)]
        if chosen:
            rs = ranges(chosen)
            span = rs[-1][1] - rs[0][0]
            print(f"  lines {lo}-{hi}{' minus ' + args.minus if args.minus else ''}: {len(chosen)} slots in {len(rs)} runs, spanning "
                  f"0x{rs[0][0]:x}-0x{rs[-1][1]:x} ({span} bytes, {span // 16 - len(chosen)} other slots between)")
            for a, b in rs:
                if b - a >= 16 * 16:
                    print(f"    run 0x{a:x}-0x{b:x}: {(b - a) // 16} slots")
            if args.ptx_mix and sym in ptx:
                mix = collections.Counter()
                for a in chosen:
                    pl = ptx[sym].get(a)
                    text = ptx_lines[pl - 1].strip() if pl and pl <= len(ptx_lines) else "?"
                    mix[text.split()[0].rstrip(";") if text else "?"] += 1
                for op, n in mix.most_common(40):
                    print(f"    {n:6d} {op}")
        if args.local:
            text = by_name[".text." + sym]["data"]
            for a in range(0, size, 16):
                op = struct.unpack_from("<Q", text, a)[0] & 0xFFF
                if op in (0x387, 0x983):
                    print(f"  0x{a:05x} {'STL' if op == 0x387 else 'LDL'} at line {where(a)}")
        if args.dump:
            a0, a1 = (int(v, 0) for v in args.dump.split("-"))
            for a in range(a0 - a0 % 16, a1, 16):
                pl = ptx.get(sym, {}).get(a)
                text = ptx_lines[pl - 1].strip() if pl and pl <= len(ptx_lines) else ""
                print(f"  0x{a:05x} {where(a):<24} ptx {pl or '-':>6}  {text}")


if __name__ == "__main__":
    sys.exit(main())
