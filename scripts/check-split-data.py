#!/usr/bin/env python3
"""Fails unless wasm-split gave the chunks their own read-only data.

wasm-split (cargo leptos build --split) re-packs each chunk's data at its own
alignment; when the re-packed segment comes out longer than the linker's, it
silently keeps all data in the shell (clutchcall.wasm), and every page then
loads every screen's static text. frontend/src/lib.rs reserves room for the
re-packing (SPLIT_DATA_SLACK); this check says when that room has run out.

Usage: check-split-data.py <site pkg dir>
"""
import pathlib
import sys

DATA_SECTION = 11


def leb128(buf: bytes, at: int) -> tuple[int, int]:
    value, shift = 0, 0
    while True:
        byte = buf[at]
        at += 1
        value |= (byte & 0x7F) << shift
        shift += 7
        if byte < 0x80:
            return value, at


def data_bytes(path: pathlib.Path) -> int:
    """Size of the module's data section (0 if it has none)."""
    buf = path.read_bytes()
    at = 8  # magic and version
    while at < len(buf):
        section, at = buf[at], at + 1
        size, at = leb128(buf, at)
        if section == DATA_SECTION:
            return size
        at += size
    return 0


def main() -> int:
    pkg = pathlib.Path(sys.argv[1])
    chunks = [p for p in pkg.glob("*.wasm") if p.name.startswith(("chunk_", "split_"))]
    if not chunks:
        print(f"check-split-data: no split chunks in {pkg} (built without --split?)", file=sys.stderr)
        return 1
    in_chunks = sum(data_bytes(chunk) for chunk in chunks)
    shell = data_bytes(pkg / "clutchcall.wasm")
    print(f"check-split-data: the shell holds {shell} bytes of data, its {len(chunks)} chunks {in_chunks}")
    # Given up, the chunks keep a few bytes each: 7% of the data in a
    # release build (13 KB against the shell's 161 KB). Split, they hold
    # 65% of it in a release build and 46% in a debug one (whose shell
    # keeps every panic message its own code can reach).
    if in_chunks * 4 < shell + in_chunks:
        print("check-split-data: wasm-split kept the data in the shell: raise SPLIT_DATA_SLACK in frontend/src/lib.rs", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
