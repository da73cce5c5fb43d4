"""Breaking SQLite files for real, the way a bad disk or a torn write does: bytes of one
page flipped in place (in a value, so the page still parses), a header zeroed, a WAL cut
after its Nth commit. The tests of engine.ops.check and of the read and write paths use
them on a cluster's catalog and volume files."""

from __future__ import annotations

import sqlite3
from pathlib import Path

WAL_HEADER = 32
FRAME_HEADER = 24


def checkpoint(db: Path) -> None:
    """Move the WAL's pages into the file (and empty the WAL), so pages are in place."""
    conn = sqlite3.connect(db)
    try:
        conn.execute("PRAGMA wal_checkpoint(TRUNCATE)")
    finally:
        conn.close()


def pages_of(db: Path, name: str) -> list[int]:
    """The page numbers of a table or index (its leaves only), from SQLite's dbstat."""
    conn = sqlite3.connect(db)
    try:
        return [
            p
            for (p,) in conn.execute(
                "SELECT pageno FROM dbstat WHERE name = ? AND pagetype = 'leaf' ORDER BY pageno",
                (name,),
            )
        ]
    finally:
        conn.close()


def _varint(data: bytes, at: int) -> tuple[int, int]:
    value = 0
    for i in range(9):
        b = data[at + i]
        if i == 8:
            return (value << 8) | b, at + 9
        value = (value << 7) | (b & 0x7F)
        if b < 0x80:
            return value, at + i + 1
    raise AssertionError("unreachable")


def _size(serial: int) -> int:
    sizes = {0: 0, 1: 1, 2: 2, 3: 3, 4: 4, 5: 6, 6: 8, 7: 8, 8: 0, 9: 0}
    if serial in sizes:
        return sizes[serial]
    return (serial - 12) // 2 if serial % 2 == 0 else (serial - 13) // 2


def values(db: Path, page: int) -> list[list[tuple[int, int, object]]]:
    """The cells of a leaf page (table or index), each a list of (file offset, size, value)
    of its values in column order (a table's rowid is not among them; an integer's value
    decoded, other values None)."""
    data = db.read_bytes()
    page_size = int.from_bytes(data[16:18], "big")
    base = (page - 1) * page_size
    head = base + (100 if page == 1 else 0)
    kind = data[head]
    assert kind in (0x0A, 0x0D), f"page {page} is not a leaf page ({kind:#x})"
    count = int.from_bytes(data[head + 3 : head + 5], "big")
    cells = []
    for i in range(count):
        at = base + int.from_bytes(data[head + 8 + 2 * i : head + 10 + 2 * i], "big")
        _, at = _varint(data, at)  # payload size
        if kind == 0x0D:
            _, at = _varint(data, at)  # rowid
        header_size, body = _varint(data, at)
        end, at = at + header_size, body
        serials = []
        while at < end:
            serial, at = _varint(data, at)
            serials.append(serial)
        cell, at = [], end
        for serial in serials:
            size = _size(serial)
            value: object = None
            if 1 <= serial <= 6:
                value = int.from_bytes(data[at : at + size], "big", signed=True)
            elif serial in (8, 9):
                value = serial - 8
            cell.append((at, size, value))
            at += size
        cells.append(cell)
    return cells


def flip(db: Path, offset: int, size: int, mask: int = 0xFF) -> None:
    """XOR `size` bytes of `db` at `offset` with `mask`."""
    with open(db, "r+b") as f:
        f.seek(offset)
        data = f.read(size)
        f.seek(offset)
        f.write(bytes(b ^ mask for b in data))


def commit_ends(wal: Path) -> list[int]:
    """The file length of a WAL after each of its commit frames, in order (the frames of
    its current generation: those whose salt is the header's)."""
    data = wal.read_bytes()
    page_size = int.from_bytes(data[8:12], "big")
    salt = data[16:24]
    frame = FRAME_HEADER + page_size
    ends = []
    at = WAL_HEADER
    while at + frame <= len(data) and data[at + 8 : at + 16] == salt:
        if int.from_bytes(data[at + 4 : at + 8], "big"):  # db size after commit: a commit
            ends.append(at + frame)
        at += frame
    return ends


def page_offset(db: Path, page: int) -> int:
    """Where page `page` (from 1) starts in the file."""
    with open(db, "rb") as f:
        header = f.read(100)
    size = int.from_bytes(header[16:18], "big")
    return (page - 1) * (65536 if size == 1 else size)
