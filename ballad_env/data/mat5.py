"""A structural check of MATLAB level-5 ``.mat`` files before scipy reads them.

scipy's compiled MAT-5 reader trusts the type codes and byte counts of a file's data element
tags: a single changed byte in a tag (an unknown type code, a byte count past the end) can
crash the whole Python process with a segmentation fault instead of raising an error. So
:func:`mat5_problem` walks every tag first (top-level elements, the subelements of each
``miMATRIX``, and the inside of each ``miCOMPRESSED`` element) and says what is wrong, so that
the loader can refuse the file by name. It checks structure only, never values; version 4
and 7.3 (HDF5) files are left to scipy, which refuses or reads them safely.

The layout (MathWorks, "MAT-File Format", level 5): a 128-byte header ending in the version
0x0100 and the endian indicator ``IM`` (little-endian) or ``MI``; then data elements, each an
8-byte tag (type, byte count) and its data, or a 4-byte "small" tag (byte count in the upper
16 bits) with up to 4 bytes of data. Subelements of a matrix are padded to 8 bytes; a
top-level element is followed directly by the next, as scipy reads them.
"""

from __future__ import annotations

import struct
import zlib

HEADER_BYTES = 128
MI_MATRIX, MI_COMPRESSED = 14, 15
#: The data types of the format (8, 10 and 11 are reserved).
DATA_TYPES = frozenset({1, 2, 3, 4, 5, 6, 7, 9, 12, 13, MI_MATRIX, MI_COMPRESSED, 16, 17, 18})
#: Deeper nesting than this (cells of cells ...) is not checked further.
MAX_DEPTH = 64


def mat5_problem(raw: bytes, ceiling: int | None = None) -> str | None:
    """What is structurally wrong with the level-5 MAT file ``raw``, or ``None`` (also for a
    file of another version, which this check leaves to scipy). A compressed element is
    inflated to at most ``ceiling`` bytes (None: no limit): one inflating further is a
    problem (a zip bomb of a few kB would otherwise take gigabytes here)."""
    if len(raw) < HEADER_BYTES:
        return None  # scipy refuses a short file itself
    version, endian = raw[124:126], raw[126:128]
    if endian not in (b"IM", b"MI"):
        return None  # level 4, or not a MAT file: scipy decides
    order = "<" if endian == b"IM" else ">"
    if struct.unpack(order + "H", version)[0] != 0x0100:
        return None  # 7.3 (HDF5) or another version: scipy refuses it
    return _elements(raw, HEADER_BYTES, len(raw), order, depth=0, padded=False,
                     offset=0, inside="the file", ceiling=ceiling)


def _elements(buf: bytes, start: int, end: int, order: str, depth: int, padded: bool,
              offset: int, inside: str, ceiling: int | None) -> str | None:
    """Walk the data elements of ``buf[start:end]``; ``offset`` maps a position to the one
    reported (decompressed data is reported relative to its element)."""
    pos = start
    while pos < end:
        if end - pos < 8:
            return f"a data element's tag at byte {offset + pos} of {inside} is cut short"
        first, second = struct.unpack_from(order + "II", buf, pos)
        small = first >> 16 != 0
        kind, size, body = (first & 0xFFFF, first >> 16, pos + 4) if small else \
            (first, second, pos + 8)
        where = f"the data element at byte {offset + pos} of {inside}"
        if kind not in DATA_TYPES:
            return f"{where} has the unknown data type {kind}"
        if small and size > 4:
            return f"{where} is a small element of {size} bytes (at most 4)"
        if body + size > end:
            return f"{where} declares {size} bytes, past the end of {inside}"
        problem = _inside(buf, kind, body, size, order, depth, offset, where, ceiling)
        if problem:
            return problem
        if small:
            pos += 8
        else:
            pos = body + size + ((-size) % 8 if padded else 0)
    return None


def _inside(buf: bytes, kind: int, body: int, size: int, order: str, depth: int, offset: int,
            where: str, ceiling: int | None) -> str | None:
    """Check what an element holds: a matrix's subelements, a compressed element's data."""
    if depth >= MAX_DEPTH:
        return None
    if kind == MI_MATRIX:
        return _elements(buf, body, body + size, order, depth + 1, padded=True,
                         offset=offset, inside=where, ceiling=ceiling)
    if kind == MI_COMPRESSED:
        inflater = zlib.decompressobj()
        try:
            data = inflater.decompress(buf[body:body + size], 0 if ceiling is None else ceiling + 1)
        except zlib.error as err:
            return f"{where} does not decompress ({err})"
        if ceiling is not None and len(data) > ceiling:
            return (f"{where} inflates past {ceiling:,} bytes (the ceiling of a file's "
                    "arrays, $BALLAD_MAX_ARRAY_BYTES)")
        if not inflater.eof:  # as zlib.decompress says of a cut stream
            return f"{where} does not decompress (incomplete or truncated stream)"
        return _elements(data, 0, len(data), order, depth + 1, padded=False, offset=0,
                         inside=f"the decompressed data of {where}", ceiling=ceiling)
    return None


__all__ = ["DATA_TYPES", "mat5_problem"]
