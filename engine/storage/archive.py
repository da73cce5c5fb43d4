"""The archive tier's files: one Parquet file per archived partitionlet (docs/ARCHIVE.md).

Where the files live (`root`, `file_uri`, `filesystem`), writing one (`write`), checking
it (`check`), deleting one (`delete`), and reading one back as a volume reads a
partitionlet (`reader` gives an `ArchiveReader`, which has the reading methods of
`engine.storage.volume.Volume`: `read`, `first_batch_at_time`, `state`, `states`,
`replica_batches`, `batch_at`), so every reader of the engine reads archived history
through the same code as live history; columnar readers take the file's Arrow columns as
they are (`ArchiveReader.read_rows`). engine.ops.archive decides what is archived.

A file holds the columns of Spark's Kafka source (key, value, topic, partition, offset,
timestamp, timestampType, headers), zstd, in row groups of ROW_GROUP_ROWS, and in its
key-value metadata (`META_KEY`) the partitionlet it came from: id, offsets, and the
boundaries of the stored batches with their origin cluster, append time and timestamp
type, so that replication compares and sends archived batches exactly as it did live ones.
Format 2 (FORMAT) adds what transactions need: each batch's producer id, epoch and base
sequence (-1: none), and the partitionlet's transaction markers (`markers`), so that
read_committed readers leave an aborted transaction's batches out of archived history
(the aborted ranges are the catalog's, as for live history) and the wire listener answers
its markers as control batches. The new batch fields come after the old ones and the
markers under a new key, so a reader of format 1 reads a format 2 file as before; a file
of format 1 reads as one whose batches have no producer.

Checksums: every data page carries Parquet's own CRC32 (`write_page_checksum`), which
every reader here verifies (`page_checksum_verification`), and the footer's entry is
followed by its CRC32C under `META_CRC_KEY`; a damaged page or footer raises
`errors.CorruptBatch` naming the file, never altered records. A batch is verified against
its volume checksum when the archiver reads it (`Volume.replica_batches`), so the file
holds what was stored. Files written before checksums have none and are read as before.

`archive_file` in the catalog is a path relative to the cluster directory for the
cluster's own `archive/` folder (so a moved cluster directory keeps its archive) and a
full `pyarrow.fs` URI otherwise (the stream's `archive_uri` may change later; a file keeps
the one it was written with).
"""

from __future__ import annotations

import base64
import json
import threading
from bisect import bisect_right
from collections import OrderedDict
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import numpy as np
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq
import zstandard
from crc32c import crc32c

from engine.errors import CorruptBatch, InvalidArgument, StorageError
from engine.storage import batch as batch_codec
from engine.storage.reader import ArchivedRows, StoredBatch
from engine.storage.volume import SEALED, PartitionletState, ReplicaBatch

if TYPE_CHECKING:
    from collections.abc import Iterable

    from engine.storage.catalog import PartitionletRow

# The cluster's own archive folder, relative to the cluster directory.
ARCHIVE_DIR = "archive"
ROW_GROUP_ROWS = 128 * 1024
# Records re-encoded into one batch for readers (original batches are merged up to this).
READ_CHUNK_ROWS = 4096
# Archived partitionlets kept open per process (footer, batch table, one row group).
OPEN_FILES = 32
META_KEY = b"partitionlet"
META_CRC_KEY = b"partitionlet.crc32c"  # of META_KEY's value, as a decimal string
FORMAT = 2  # 1: no producer fields, no markers
URI_SCHEMES = ("file", "s3", "gs", "gcs", "hdfs", "viewfs")
# The batch table: one row per stored batch, these int64 fields.
_BATCH_FIELDS = (
    "base",
    "last",
    "count",
    "first_ts",
    "max_ts",
    "ts_type",
    "origin",
    "append_ms",
    "headers",
    "producer_id",
    "producer_epoch",
    "base_seq",
)
NO_PRODUCER = (-1, -1, -1)
# What the engine's readers take from a row group: the topic, the partition and each
# record's timestamp type are the partitionlet's and its batch table's, so their columns
# are not decoded (Spark's readers read them all).
READ_COLUMNS = ("key", "value", "offset", "timestamp", "headers")
# Encodings chosen for reading speed: offsets and timestamps, which grow, as deltas (a
# third of the decoding time of plain ones); values, seldom repeated, without the
# dictionary a writer tries first (decoding a dictionary copies every value once more).
# Any Parquet reader reads both (Spark's since 3.3); files written before read as ever.
DICTIONARY_COLUMNS = (
    "key",
    "topic",
    "partition",
    "timestampType",
    "headers.list.element.key",
    "headers.list.element.value",
)
COLUMN_ENCODINGS = {"offset": "DELTA_BINARY_PACKED", "timestamp": "DELTA_BINARY_PACKED"}
_B = {name: i for i, name in enumerate(_BATCH_FIELDS)}


# --- where files live ------------------------------------------------------------------


def check_uri(uri: str) -> str:
    """`uri` if it is an archive root this engine can use: '' (the cluster's own folder)
    or a `pyarrow.fs` URI of a known scheme that pyarrow parses; `InvalidArgument` saying
    why not. Never connects anywhere."""
    if not isinstance(uri, str):
        raise InvalidArgument(f"archive_uri must be a string, got {uri!r}")
    if uri == "":
        return uri
    parts = urlsplit(uri)
    if parts.scheme not in URI_SCHEMES:
        raise InvalidArgument(
            f"archive_uri {uri!r} must be empty or a URI of scheme "
            f"{', '.join(s + '://' for s in URI_SCHEMES)}"
        )
    if parts.scheme == "file":
        if parts.netloc not in ("", "localhost") or not parts.path.startswith("/"):
            raise InvalidArgument(f"archive_uri {uri!r} must be file:///an/absolute/path")
    elif not parts.netloc:
        raise InvalidArgument(f"archive_uri {uri!r} names no bucket or host")
    if parts.scheme in ("hdfs", "viewfs"):
        return uri  # pyarrow connects to parse these (and needs a JVM): checked when used
    probe = uri
    if parts.scheme == "s3":
        # pyarrow asks AWS for a bucket's region unless told: parse without asking
        query = dict(parse_qsl(parts.query))
        query.setdefault("region", "us-east-1")
        probe = urlunsplit(parts._replace(query=urlencode(query)))
    try:
        pafs.FileSystem.from_uri(probe)
    except (pa.ArrowInvalid, ValueError, OSError) as exc:
        raise InvalidArgument(f"archive_uri {uri!r} is not a valid URI: {exc}") from None
    return uri


def root(archive_uri: str) -> str:
    """The archive root of a stream: its `archive_uri`, or the cluster's own folder
    (ARCHIVE_DIR, relative to the cluster directory)."""
    return archive_uri or ARCHIVE_DIR


def file_name(
    archive_root: str, stream: str, topic: str, partition: int, base: int, end: int, pl_id: int
) -> str:
    """Where partitionlet `pl_id` is archived under `archive_root` (deterministic, so a
    rerun after a crash overwrites what it wrote): <root>/<stream path>/<topic>/
    <partition>/<base>-<end>-<id>.parquet. A URI root keeps its query (endpoint...)."""
    rel = f"{stream.strip('/')}/{topic}/{partition}/{base:020d}-{end:020d}-{pl_id}.parquet"
    parts = urlsplit(archive_root)
    if not parts.scheme:
        return f"{archive_root.rstrip('/')}/{rel}"
    return urlunsplit(parts._replace(path=parts.path.rstrip("/") + "/" + rel))


def file_uri(cluster_path: Path, name: str) -> str:
    """The full URI of an archived file (a relative name is under the cluster directory)."""
    if urlsplit(name).scheme:
        return name
    return (Path(cluster_path).resolve() / name).as_uri()


def filesystem(cluster_path: Path, name: str) -> tuple[Any, str]:
    """(pyarrow FileSystem, path in it) of an archived file's name."""
    if not urlsplit(name).scheme:
        return pafs.LocalFileSystem(), str(Path(cluster_path).resolve() / name)
    try:
        found: tuple[Any, str] = pafs.FileSystem.from_uri(name)
        return found
    except (pa.ArrowInvalid, ValueError, OSError) as exc:
        raise StorageError(f"cannot open the archive of {name}: {exc}") from exc


# --- writing -------------------------------------------------------------------------------


@dataclass
class Written:
    """What `write` stored: rows, bytes of the file, first and last offset (None: empty)."""

    name: str
    rows: int
    bytes: int
    first_offset: int | None
    last_offset: int | None


def _meta(
    pl: PartitionletRow,
    batches: list[tuple[Any, ...]],
    origins: list[str],
    markers: Sequence[tuple[int, int, int, bool, int]],
) -> bytes:
    table = np.array(batches, dtype=np.int64).reshape(-1, len(_BATCH_FIELDS))
    packed = zstandard.ZstdCompressor().compress(table.tobytes())
    return json.dumps(
        {
            "format": FORMAT,
            "id": pl.id,
            "topic_id": pl.topic_id,
            "partition": pl.partition,
            "base_offset": pl.base_offset,
            "end_offset": pl.end_offset,
            "created_ms": pl.created_ms,
            "origins": origins,
            "fields": list(_BATCH_FIELDS),
            "batches": base64.b64encode(packed).decode(),
            # the fifth field: the marker's origin in `origins` (-1: this cluster's)
            "markers": [[o, p, e, int(c), k] for o, p, e, c, k in markers],
        }
    ).encode()


def write(
    cluster_path: Path,
    name: str,
    pl: PartitionletRow,
    schema: Any,
    parts: Iterable[tuple[Any, ReplicaBatch, bool, tuple[int, int, int] | None]],
    markers: Sequence[tuple[int, int, int, bool, str | None]] = (),
) -> Written:
    """Write partitionlet `pl` as the Parquet file `name` (replacing any file there):
    `parts` gives, in offset order, each stored batch as an Arrow RecordBatch of `schema`
    with the batch it came from, whether it had headers and its producer (id, epoch, base
    sequence; None: none); `markers` are the partitionlet's transaction markers (offset,
    producer id, epoch, True for COMMIT, origin; None: this cluster), as
    `Volume.replica_markers` gives them."""
    fs, path = filesystem(cluster_path, name)
    parent = path.rsplit("/", 1)[0]
    try:
        fs.create_dir(parent, recursive=True)
    except OSError:
        pass  # object stores have no directories to make
    batches: list[tuple[Any, ...]] = []
    origins: dict[str, int] = {}
    pending: list[Any] = []
    pending_rows = rows = 0
    first = last = None
    # The footer is written at close: the metadata (batch table) is only known at the end,
    # so the writer is given it then (add_key_value_metadata).
    with fs.open_output_stream(path) as sink:
        writer = pq.ParquetWriter(
            sink,
            schema,
            compression="zstd",
            write_statistics=True,
            version="2.6",
            write_page_checksum=True,
            use_dictionary=list(DICTIONARY_COLUMNS),
            column_encoding=COLUMN_ENCODINGS,
        )
        try:
            for rb, b, has_headers, producer in parts:
                origin = origins.setdefault(b.origin, len(origins))
                batches.append(
                    (
                        b.base_offset, b.last_offset, rb.num_rows, b.first_ts, b.max_ts,
                        b.ts_type, origin, b.append_ms, int(has_headers),
                        *(producer or NO_PRODUCER),
                    )
                )  # fmt: skip
                if rb.num_rows:
                    offsets = rb.column("offset")
                    first = offsets[0].as_py() if first is None else first
                    last = offsets[-1].as_py()
                pending.append(rb)
                pending_rows += rb.num_rows
                rows += rb.num_rows
                if pending_rows >= ROW_GROUP_ROWS:
                    pending_rows = _flush(writer, schema, pending, pending_rows, final=False)
            _flush(writer, schema, pending, pending_rows, final=True)
            kept = [
                (o, p, e, c, -1 if k is None else origins.setdefault(k, len(origins)))
                for o, p, e, c, k in markers
            ]
            meta = _meta(pl, batches, list(origins), kept)
            writer.add_key_value_metadata({META_KEY: meta, META_CRC_KEY: str(crc32c(meta))})
        finally:
            writer.close()
    size = fs.get_file_info(path).size or 0
    return Written(name, rows, size, first, last)


def _flush(writer: Any, schema: Any, pending: list[Any], count: int, *, final: bool) -> int:
    """Write whole row groups of ROW_GROUP_ROWS out of `pending` (all of it if `final`);
    returns the rows kept back."""
    if not pending:
        return 0
    table = pa.Table.from_batches(pending, schema=schema)
    whole = count if final else (count // ROW_GROUP_ROWS) * ROW_GROUP_ROWS
    if whole:
        writer.write_table(table.slice(0, whole), row_group_size=ROW_GROUP_ROWS)
    pending.clear()
    rest = table.slice(whole)
    left: int = rest.num_rows
    if left:
        pending.extend(rest.combine_chunks().to_batches())
    return left


def check(cluster_path: Path, name: str, pl: PartitionletRow, written: Written) -> None:
    """Read the file's footer back and compare it with what was written and with `pl`
    (row count, offsets within the partitionlet, the partitionlet's id);
    `StorageError` saying what differs."""
    fs, path = filesystem(cluster_path, name)
    with fs.open_input_file(path) as f:
        meta = pq.read_metadata(f)
    problems = []
    if meta.num_rows != written.rows:
        problems.append(f"{meta.num_rows} rows, not {written.rows}")
    info = json.loads((meta.metadata or {}).get(META_KEY, b"{}"))
    if info.get("id") != pl.id:
        problems.append(f"partitionlet {info.get('id')}, not {pl.id}")
    col = meta.schema.to_arrow_schema().get_field_index("offset")
    lows, highs = [], []
    for i in range(meta.num_row_groups):
        stats = meta.row_group(i).column(col).statistics
        if stats is None or not stats.has_min_max:
            problems.append(f"row group {i} has no offset statistics")
            continue
        lows.append(stats.min)
        highs.append(stats.max)
    if lows:
        low, high = min(lows), max(highs)
        if (low, high) != (written.first_offset, written.last_offset):
            problems.append(
                f"offsets {low}..{high}, not {written.first_offset}..{written.last_offset}"
            )
        if low < pl.base_offset or (pl.end_offset is not None and high >= pl.end_offset):
            problems.append(f"offsets {low}..{high} outside [{pl.base_offset}, {pl.end_offset})")
    elif written.rows:
        problems.append("no offsets")
    if problems:
        raise StorageError(f"archive file {name} of partitionlet {pl.id}: {'; '.join(problems)}")


def verify(cluster_path: Path, pl: PartitionletRow) -> str | None:
    """What is wrong with archived partitionlet `pl`'s file against the catalog (missing,
    unreadable, another partitionlet's, a row count or offsets that differ), or None."""
    assert pl.archive_file is not None
    try:
        fs, path = filesystem(cluster_path, pl.archive_file)
        with fs.open_input_file(path) as f:
            meta = pq.read_metadata(f)
    except FileNotFoundError:
        return f"archive file {pl.archive_file} is missing"
    except (OSError, pa.ArrowException, StorageError) as exc:
        return f"archive file {pl.archive_file} cannot be read: {exc}"
    info = json.loads((meta.metadata or {}).get(META_KEY, b"{}"))
    if info.get("id") != pl.id:
        return f"archive file {pl.archive_file} holds partitionlet {info.get('id')}"
    if pl.archive_messages is not None and meta.num_rows != pl.archive_messages:
        return (
            f"archive file {pl.archive_file} holds {meta.num_rows} messages, the catalog "
            f"says {pl.archive_messages}"
        )
    if (info.get("base_offset"), info.get("end_offset")) != (pl.base_offset, pl.end_offset):
        return (
            f"archive file {pl.archive_file} holds offsets {info.get('base_offset')}.."
            f"{info.get('end_offset')}, the catalog says {pl.base_offset}..{pl.end_offset}"
        )
    return None


def delete(cluster_path: Path, name: str) -> bool:
    """Delete an archived file; False if it was not there (not an error)."""
    forget(name)
    fs, path = filesystem(cluster_path, name)
    try:
        fs.delete_file(path)
    except FileNotFoundError:
        return False
    except OSError as exc:
        if "does not exist" in str(exc) or "not found" in str(exc).lower():
            return False
        raise StorageError(f"cannot delete archive file {name}: {exc}") from exc
    return True


# --- reading -------------------------------------------------------------------------------


def _binary_column(column: Any) -> tuple[bytes, bytes, bool]:
    """A binary Arrow column as a stored batch lays it out: int32 lengths (-1: null), the
    bytes joined, and whether any is not null; from its offsets and data buffers."""
    arr = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
    if arr.type != pa.binary():
        arr = arr.cast(pa.binary())
    n = len(arr)
    validity, offsets_buffer, data = arr.buffers()
    bounds = np.frombuffer(offsets_buffer, dtype="<i4", count=n + 1, offset=4 * arr.offset)
    lengths = np.diff(bounds).astype("<i4")
    nulls = arr.null_count
    if nulls:
        lengths[arr.is_null().to_numpy(zero_copy_only=False)] = -1
    first, last = int(bounds[0]), int(bounds[-1])
    joined = b"" if data is None or last == first else memoryview(data)[first:last].tobytes()
    return lengths.tobytes(), joined, nulls < n


class ArchiveReader:
    """One archived partitionlet read as a volume reads a live one (the same methods and
    row shapes); a file is complete and checked before the catalog names it, and never
    rewritten after, so what it caches stays true. Opened lazily; keeps the footer, the
    batch table and one decoded row group (the columns of READ_COLUMNS), which the slices
    `read_rows` gives share. Any thread may call it (one lock; readers of one process share
    it)."""

    def __init__(self, cluster_path: Path, pl: PartitionletRow) -> None:
        assert pl.archive_file is not None and pl.end_offset is not None
        self.pl = pl
        self.name = pl.archive_file
        self._cluster_path = cluster_path
        self._lock = threading.Lock()
        self._file: Any = None
        self._group: tuple[int, Any] | None = None  # (index, table)
        self._chunks_cache: list[tuple[int, int]] | None = None
        self._runs_cache: list[tuple[int, int, int, int, int]] | None = None

    # the file, its batch table and offsets, on first use
    def _open(self) -> None:
        if self._file is not None:
            return
        fs, path = filesystem(self._cluster_path, self.name)
        try:
            f = open_file(fs, path)
        except FileNotFoundError as exc:
            raise StorageError(
                f"archive file {self.name} of partitionlet {self.pl.id} is missing"
            ) from exc
        info = json.loads(footer(f, self.name, self.pl))
        raw = zstandard.ZstdDecompressor().decompress(base64.b64decode(info["batches"]))
        table = np.frombuffer(raw, dtype=np.int64).reshape(-1, len(info["fields"]))
        if table.shape[1] < len(_BATCH_FIELDS):  # format 1: batches without a producer
            missing = np.full((len(table), len(_BATCH_FIELDS) - table.shape[1]), -1, np.int64)
            table = np.hstack([table, missing])
        self._origins = info["origins"]
        markers = info.get("markers", ())
        self._markers = [(m[0], m[1], m[2], bool(m[3])) for m in markers]
        # files written before markers kept their origin read them as this cluster's
        self._marker_origins = [
            self._origins[m[4]] if len(m) > 4 and m[4] >= 0 else None for m in markers
        ]
        self._batches = table
        # row index where each batch starts in the file (rows are in offset order)
        self._starts = np.concatenate(([0], np.cumsum(table[:, _B["count"]]))).astype(np.int64)
        self._lasts = table[:, _B["last"]]
        # the running max timestamp per batch: the time index, as a volume's ts_high
        self._ts_high = np.maximum.accumulate(table[:, _B["max_ts"]]) if len(table) else table[:, 0]
        md = f.metadata
        self._group_starts = np.cumsum(
            [0] + [md.row_group(i).num_rows for i in range(md.num_row_groups)]
        )
        self._file = f

    def _chunks(self) -> list[tuple[int, int]]:
        """Runs of batches [i, j) read as one: adjacent, same timestamp type and headers
        flag, together at most READ_CHUNK_ROWS records."""
        if self._chunks_cache is None:
            t = self._batches
            out: list[tuple[int, int]] = []
            i = 0
            n = len(t)
            while i < n:
                j = i + 1
                rows = t[i, _B["count"]]
                while (
                    j < n
                    and rows + t[j, _B["count"]] <= READ_CHUNK_ROWS
                    and t[j, _B["ts_type"]] == t[i, _B["ts_type"]]
                    and t[j, _B["headers"]] == t[i, _B["headers"]]
                ):
                    rows += t[j, _B["count"]]
                    j += 1
                out.append((i, j))
                i = j
            self._chunks_cache = out
            self._chunk_ends = [j for _, j in out]
        return self._chunks_cache

    def _row_group(self, g: int) -> Any:
        """Row group `g` as an Arrow table (the last one read is kept)."""
        if self._group is None or self._group[0] != g:
            self._group = (g, read_row_group(self._file, g, self.name, self.pl, READ_COLUMNS))
        return self._group[1]

    def _rows(self, start: int, end: int) -> Any:
        """File rows [start, end) as an Arrow table (from the row groups holding them)."""
        pieces = []
        gs = self._group_starts
        g = int(np.searchsorted(gs, start, side="right")) - 1
        while start < end:
            table = self._row_group(g)
            lo = start - int(gs[g])
            hi = min(end, int(gs[g + 1])) - int(gs[g])
            pieces.append(table.slice(lo, hi - lo))
            start = int(gs[g]) + hi
            g += 1
        return pa.concat_tables(pieces) if len(pieces) > 1 else pieces[0]

    def _runs(self) -> list[tuple[int, int, int, int, int]]:
        """The batches of each row group: (row group, first batch, end batch, first row,
        end row); a batch that a row group boundary cuts is in both, each with its rows."""
        if self._runs_cache is None:
            starts, gs = self._starts, self._group_starts
            out = []
            for g in range(len(gs) - 1):
                lo, hi = int(gs[g]), int(gs[g + 1])
                # the first batch ending after the group's start, the first starting at its end
                i = int(np.searchsorted(starts[1:], lo, side="right"))
                j = int(np.searchsorted(starts[:-1], hi, side="left"))
                out.append((g, i, j, lo, hi))
            self._runs_cache = out
            self._run_ends = [j for _, _, j, _, _ in out]
        return self._runs_cache

    def read_rows(
        self,
        pl_id: int,
        from_offset: int,
        max_runs: int,
        skip: Sequence[tuple[int, int, int]] = (),
    ) -> list[ArchivedRows]:
        """What `read` reads, as the file holds it: runs of adjacent batches, each a slice
        of one row group's Arrow table (no copy, no re-encoding: a columnar reader hands
        them on as they are), without the batches of the aborted transactions in `skip`.
        In offset order, from the run holding `from_offset` (a batch a row group cuts
        gives a run on each side, the first of which may end before `from_offset`)."""
        dropped = self.aborted_mask(skip) if skip else None
        with self._lock:
            self._open()
            t, starts, gs = self._batches, self._starts, self._group_starts
            first = int(np.searchsorted(self._lasts, from_offset, side="left"))
            runs = self._runs()
            out: list[ArchivedRows] = []
            at = bisect_right(self._run_ends, first)  # the first group ending after it
            for g, gi, gj, lo, hi in runs[at:]:
                for i, j in _kept([(max(gi, first), gj)], dropped):
                    start, end = max(lo, int(starts[i])), min(hi, int(starts[j]))
                    if start >= end:
                        continue  # batches compaction emptied: nothing to read
                    if len(out) >= max_runs:
                        return out
                    rows = self._row_group(g).slice(start - int(gs[g]), end - start)
                    offsets = rows.column("offset").to_numpy()
                    kinds = t[i:j, _B["ts_type"]]
                    if (kinds == kinds[0]).all():
                        types = np.full(end - start, kinds[0], dtype=np.int32)
                    else:  # each batch's type for each of its rows in the run
                        bounds = np.clip(starts[i : j + 1], start, end)
                        types = np.repeat(kinds.astype(np.int32), np.diff(bounds))
                    rows = rows.append_column("timestampType", pa.array(types))
                    out.append(
                        ArchivedRows(
                            int(t[i, _B["base"]]) if starts[i] >= lo else int(offsets[0]),
                            int(t[j - 1, _B["last"]]) if starts[j] <= hi else int(offsets[-1]),
                            int(t[i:j, _B["first_ts"]].min()),
                            int(t[i:j, _B["max_ts"]].max()),
                            rows,
                            offsets,
                        )
                    )
            return out

    def _payload(self, i: int, j: int, base: int) -> tuple[bytes, int]:
        """Batches [i, j) re-encoded as one plain batch at `base`; and its row count."""
        t = self._batches
        start, end = int(self._starts[i]), int(self._starts[j])
        if start == end:
            return batch_codec.encode([None], [int(t[i, _B["first_ts"]])]), 0
        table = self._rows(start, end)
        # laid out from Arrow's buffers as numpy arrays: no Python object per record (the
        # headers aside), so an archived read costs about what a live one does
        offsets = table.column("offset").to_numpy()
        stamps = table.column("timestamp").cast(pa.int64()).to_numpy() // 1000
        value_lengths, values, _ = _binary_column(table.column("value"))
        key_lengths, keys, any_key = _binary_column(table.column("key"))
        headers = None
        if t[i, _B["headers"]]:
            headers = batch_codec.encode_headers(
                [
                    [(h["key"], h["value"]) for h in hs] if hs else []
                    for hs in table.column("headers").to_pylist()
                ]
            )
        deltas = offsets - base
        contiguous = int(deltas[-1]) == len(deltas) - 1 and int(deltas[0]) == 0
        base_ts = int(stamps.min())
        payload = batch_codec.assemble(
            end - start,
            base_ts,
            None if int(stamps.max()) == base_ts else stamps.astype("<i8").tobytes(),
            None if contiguous else deltas.astype("<u4").tobytes(),
            value_lengths,
            values,
            key_lengths if any_key else None,
            keys if any_key else b"",
            headers,
        )
        return payload, end - start

    # --- the methods of Volume -------------------------------------------------------------

    def markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool]]:
        """The transaction markers at offsets from_offset..to_offset, as `Volume.markers`
        (none in a file of format 1)."""
        with self._lock:
            self._open()
        return [m for m in self._markers if from_offset <= m[0] <= to_offset]

    def aborted_mask(self, skip: Sequence[tuple[int, int, int]]) -> Any:
        """One bool per stored batch: whether it belongs to an aborted transaction of
        `skip` (producer id, first offset, marker offset), as `Volume.read` leaves out."""
        with self._lock:
            self._open()
        t = self._batches
        mask = np.zeros(len(t), dtype=bool)
        for producer_id, first, marker in skip:
            base = t[:, _B["base"]]
            mask |= (t[:, _B["producer_id"]] == producer_id) & (base >= first) & (base <= marker)
        return mask

    def aborted_offsets(
        self, pl_id: int, skip: Sequence[tuple[int, int, int]]
    ) -> list[tuple[int, int]]:
        """(base offset, last offset) of the stored batches of the aborted transactions of
        `skip`, in offset order: the offsets a read_committed reader leaves out, as
        `Volume.aborted_offsets`."""
        if not skip:
            return []
        mask = self.aborted_mask(skip)
        t = self._batches[mask]
        return [(int(b), int(e)) for b, e in zip(t[:, _B["base"]], t[:, _B["last"]], strict=True)]

    def replica_markers(
        self, pl_id: int, from_offset: int, to_offset: int
    ) -> list[tuple[int, int, int, bool, str | None]]:
        """`markers` with each one's origin (None: this cluster's), as
        `Volume.replica_markers`."""
        with self._lock:
            self._open()
        return [
            (*m, origin)
            for m, origin in zip(self._markers, self._marker_origins, strict=True)
            if from_offset <= m[0] <= to_offset
        ]

    def producers(self, pl_id: int) -> list[tuple[int, int, int, int]]:
        """None: a producer's state is its recent batches, and history is not recent (Kafka
        also forgets a producer once its batches are gone)."""
        return []

    def gap_end(
        self, pl_id: int, position: int, skip: Sequence[tuple[int, int, int]] = ()
    ) -> int | None:
        """None: an archived partitionlet is sealed, so its chain row says where it ends."""
        return None

    def read(
        self,
        pl_id: int,
        from_offset: int,
        max_batches: int,
        skip: Sequence[tuple[int, int, int]] = (),
    ) -> list[StoredBatch]:
        """Batches holding offsets >= `from_offset`, in offset order, as (base_offset,
        last_offset, ts_type, first_ts, max_ts, payload), as `Volume.read`: `skip` leaves
        out the batches of aborted transactions (producer id, first offset, marker
        offset)."""
        dropped = self.aborted_mask(skip) if skip else None
        with self._lock:
            self._open()
            t = self._batches
            first = int(np.searchsorted(self._lasts, from_offset, side="left"))
            chunks = self._chunks()
            out: list[StoredBatch] = []
            at = bisect_right(self._chunk_ends, first)  # the first chunk ending after it
            for i, j in _kept(chunks[at:], dropped):
                if len(out) >= max_batches:
                    break
                base = int(t[i, _B["base"]])
                payload, count = self._payload(i, j, base)
                if count == 0:
                    continue  # batches compaction emptied: nothing to read
                out.append(
                    (
                        base,
                        int(t[j - 1, _B["last"]]),
                        int(t[i, _B["ts_type"]]),
                        int(t[i:j, _B["first_ts"]].min()),
                        int(t[i:j, _B["max_ts"]].max()),
                        payload,
                    )
                )
            return out

    def first_batch_at_time(self, pl_id: int, timestamp_ms: int) -> StoredBatch | None:
        """The first batch whose running max timestamp reaches `timestamp_ms`."""
        with self._lock:
            self._open()
        hits = np.nonzero(self._ts_high >= timestamp_ms)[0]
        for k in hits:
            got = self.read(pl_id, int(self._batches[int(k), _B["base"]]), 1)
            if got:
                return got[0]
        return None

    def state(self, pl_id: int) -> PartitionletState:
        pl = self.pl
        assert pl.end_offset is not None  # archived means sealed (and __init__ checked it)
        return PartitionletState(
            pl.id, pl.base_offset, pl.end_offset, SEALED, pl.archive_bytes or 0, 0,
            pl.archive_messages or 0, pl.first_ts, pl.max_ts, pl.created_ms,
        )  # fmt: skip

    def states(self, pl_ids: list[int]) -> dict[int, PartitionletState]:
        return {i: self.state(i) for i in pl_ids if i == self.pl.id}

    def replica_batches(self, pl_id: int, from_offset: int, limit: int) -> list[ReplicaBatch]:
        """The stored batches holding offsets >= `from_offset`, exactly as they were stored
        (offsets, origin, timestamps, producer fields), as `Volume.replica_batches`."""
        with self._lock:
            self._open()
            t = self._batches
            first = int(np.searchsorted(self._lasts, from_offset, side="left"))
            out: list[ReplicaBatch] = []
            for i in range(first, len(t)):
                if len(out) >= limit:
                    break
                base = int(t[i, _B["base"]])
                payload, count = self._payload(i, i + 1, base)
                if count == 0:
                    continue
                producer = int(t[i, _B["producer_id"]])
                known = producer >= 0  # -1: no idempotent producer wrote the batch
                last, ts_type = int(t[i, _B["last"]]), int(t[i, _B["ts_type"]])
                first_ts, max_ts = int(t[i, _B["first_ts"]]), int(t[i, _B["max_ts"]])
                out.append(
                    ReplicaBatch(
                        base, last, count, first_ts, max_ts, ts_type,
                        self._origins[int(t[i, _B["origin"]])], payload,
                        int(t[i, _B["append_ms"]]),
                        producer_id=producer if known else None,
                        producer_epoch=int(t[i, _B["producer_epoch"]]) if known else None,
                        base_seq=int(t[i, _B["base_seq"]]) if known else None,
                        # of the batch as re-encoded here (its pages passed their CRCs)
                        crc=batch_codec.checksum(base, last, ts_type, first_ts, max_ts, payload),
                    )
                )  # fmt: skip
            return out

    def batch_at(self, pl_id: int, offset: int) -> tuple[int, int, str] | None:
        with self._lock:
            self._open()
            t = self._batches
            i = int(np.searchsorted(self._lasts, offset, side="left"))
            if i >= len(t) or t[i, _B["base"]] > offset:
                return None
            return (
                int(t[i, _B["base"]]),
                int(t[i, _B["last"]]),
                self._origins[int(t[i, _B["origin"]])],
            )


def open_file(fs: Any, path: str) -> Any:
    """An archived file opened for reading, every data page checked against its CRC as it
    is read (a page written without one, as before checksums, is read unchecked)."""
    return pq.ParquetFile(fs.open_input_file(path), page_checksum_verification=True)


def damaged(name: str, pl: PartitionletRow, problem: str) -> CorruptBatch:
    """The error of a damaged archive file `name` of partitionlet `pl`."""
    return CorruptBatch(
        f"archive file {name}: {problem}",
        topic=f"#{pl.topic_id}",
        partition=pl.partition,
        base_offset=pl.base_offset,
        last_offset=None if pl.end_offset is None else pl.end_offset - 1,
        partitionlet=pl.id,
    )


def footer(f: Any, name: str, pl: PartitionletRow) -> bytes:
    """The partitionlet entry of an open file's footer, checked against its CRC32C."""
    kv = f.metadata.metadata or {}
    meta: bytes | None = kv.get(META_KEY)
    if meta is None:
        raise damaged(name, pl, "its footer has no partitionlet entry")
    crc = kv.get(META_CRC_KEY)
    if crc is not None and crc != str(crc32c(meta)).encode():
        raise damaged(name, pl, "its footer does not match the CRC32C stored with it")
    return meta


def read_row_group(
    f: Any, i: int, name: str, pl: PartitionletRow, columns: Sequence[str] | None = None
) -> Any:
    """Row group `i` of an open file (its `columns`; None: all); a page that fails its CRC
    (or does not decode) raises `CorruptBatch`."""
    try:
        return f.read_row_group(i, columns=None if columns is None else list(columns))
    except (OSError, pa.ArrowException) as exc:
        raise damaged(name, pl, f"row group {i} is damaged ({exc})") from None


def verify_pages(cluster_path: Path, pl: PartitionletRow) -> list[CorruptBatch]:
    """Read every page of archived partitionlet `pl`'s file against its CRC, and its
    footer (`plet check`): a `CorruptBatch` per damaged row group or footer, none when
    sound. A missing file is a `StorageError`, as for any reader."""
    assert pl.archive_file is not None
    name = pl.archive_file
    fs, path = filesystem(cluster_path, name)
    try:
        f = open_file(fs, path)
    except FileNotFoundError as exc:
        raise StorageError(f"archive file {name} of partitionlet {pl.id} is missing") from exc
    except (OSError, pa.ArrowException) as exc:
        return [damaged(name, pl, f"it does not open as Parquet ({exc})")]
    problems = []
    try:
        footer(f, name, pl)
    except CorruptBatch as exc:
        problems.append(exc)
    for i in range(f.metadata.num_row_groups):
        try:
            read_row_group(f, i, name, pl)
        except CorruptBatch as exc:
            problems.append(exc)
    return problems


def _kept(chunks: Sequence[tuple[int, int]], dropped: Any) -> Iterable[tuple[int, int]]:
    """The chunks [i, j) of batches without the `dropped` ones (None: all kept): a chunk
    with some splits into the runs between them."""
    for i, j in chunks:
        if dropped is None or not dropped[i:j].any():
            yield i, j
            continue
        run = None
        for k in range(i, j):
            if dropped[k]:
                if run is not None:
                    yield run, k
                run = None
            elif run is None:
                run = k
        if run is not None:
            yield run, j


_open: OrderedDict[tuple[str, str], ArchiveReader] = OrderedDict()
_open_lock = threading.Lock()


def reader(cluster_path: Path, pl: PartitionletRow) -> ArchiveReader:
    """The reader of an archived partitionlet, shared by the process (at most OPEN_FILES
    are kept open; the least recently used goes)."""
    key = (str(cluster_path), pl.archive_file or "")
    with _open_lock:
        got = _open.get(key)
        if got is not None and got.pl == pl:
            _open.move_to_end(key)
            return got
        got = _open[key] = ArchiveReader(cluster_path, pl)
        while len(_open) > OPEN_FILES:
            _open.popitem(last=False)
        return got


def forget(name: str) -> None:
    """Drop the open readers of file `name` (it is being deleted)."""
    with _open_lock:
        for key in [k for k in _open if k[1] == name]:
            del _open[key]
