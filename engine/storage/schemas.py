"""The schema registry's tables in the catalog: schemas by global id, subjects' versions,
and compatibility settings (tables `schemas`, `schema_versions`, `schema_config`).

The SQL of engine.client.schemas lives here; the rules (parsing a schema, which subject
belongs to which stream, compatibility, ACEs) stay there. Each method is one short
transaction. A schema is stored once per fingerprint, under one global id, however many
subjects register it (as Confluent's registry does; engine.client.schemas decides which
fingerprint a registration uses), so a message's wire-format id names one text for good:
ids come from AUTOINCREMENT and are never handed out twice, even after a permanent delete.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, NamedTuple

if TYPE_CHECKING:
    from engine.storage.catalog import Catalog


class SchemaRow(NamedTuple):
    id: int
    schema_type: str  # AVRO, PROTOBUF, JSON
    schema: str
    refs: str  # JSON list of {"name", "subject", "version"}
    fingerprint: str


class VersionRow(NamedTuple):
    subject: str
    version: int
    deleted: bool
    schema: SchemaRow


_VERSION_SQL = (
    "SELECT v.subject, v.version, v.deleted, s.id, s.schema_type, s.schema, s.refs, "
    "s.fingerprint FROM schema_versions v JOIN schemas s ON s.id = v.schema_id"
)


def _version(row: tuple[Any, ...]) -> VersionRow:
    return VersionRow(row[0], row[1], bool(row[2]), SchemaRow(*row[3:]))


class SchemaTable:
    """The registry tables of one catalog: one short transaction per call, so a schema
    text gets one global id for good and a subject's version numbers only grow; times
    come from the catalog's clock. Any thread may call it (engine.client.schemas does)."""

    def __init__(self, catalog: Catalog) -> None:
        self._catalog = catalog

    # --- writing ------------------------------------------------------------------------

    def register(
        self, subject: str, schema_type: str, schema: str, refs: str, fingerprint: str
    ) -> tuple[VersionRow, bool]:
        """Add the schema as the subject's next version, unless a live version of the
        subject already has it. Returns (the version, whether it was added)."""
        conn = self._catalog.conn
        with self._catalog.write():
            row = conn.execute(
                f"{_VERSION_SQL} WHERE v.subject = ? AND s.fingerprint = ? AND v.deleted = 0 "
                "ORDER BY v.version DESC LIMIT 1",
                (subject, fingerprint),
            ).fetchone()
            if row is not None:
                return _version(row), False
            found = conn.execute(
                "SELECT id FROM schemas WHERE fingerprint = ?", (fingerprint,)
            ).fetchone()
            if found is None:
                cur = conn.execute(
                    "INSERT INTO schemas (schema_type, schema, refs, fingerprint, created_ms) "
                    "VALUES (?, ?, ?, ?, ?)",
                    (schema_type, schema, refs, fingerprint, self._catalog.clock.now_ms()),
                )
                schema_id = int(cur.lastrowid or 0)
            else:
                schema_id = found[0]
            # soft-deleted versions keep their numbers: a new version comes after them
            (last,) = conn.execute(
                "SELECT coalesce(max(version), 0) FROM schema_versions WHERE subject = ?",
                (subject,),
            ).fetchone()
            conn.execute(
                "INSERT INTO schema_versions (subject, version, schema_id, deleted, created_ms) "
                "VALUES (?, ?, ?, 0, ?)",
                (subject, last + 1, schema_id, self._catalog.clock.now_ms()),
            )
            row = conn.execute(
                f"{_VERSION_SQL} WHERE v.subject = ? AND v.version = ?", (subject, last + 1)
            ).fetchone()
            return _version(row), True

    def delete_versions(self, subject: str, versions: list[int], permanent: bool) -> None:
        """Soft-delete (mark) or permanently delete the subject's `versions`; a schema no
        version names any more goes with its last permanent delete."""
        conn = self._catalog.conn
        with self._catalog.write():
            for version in versions:
                if permanent:
                    conn.execute(
                        "DELETE FROM schema_versions WHERE subject = ? AND version = ?",
                        (subject, version),
                    )
                else:
                    conn.execute(
                        "UPDATE schema_versions SET deleted = 1 WHERE subject = ? AND version = ?",
                        (subject, version),
                    )
            if permanent:
                conn.execute(
                    "DELETE FROM schemas WHERE id NOT IN (SELECT schema_id FROM schema_versions)"
                )
                if not conn.execute(
                    "SELECT 1 FROM schema_versions WHERE subject = ? LIMIT 1", (subject,)
                ).fetchone():
                    conn.execute("DELETE FROM schema_config WHERE subject = ?", (subject,))

    def set_compatibility(self, subject: str, level: str | None) -> None:
        """Set (or, with None, drop) the compatibility level of `subject` ('' is the
        registry's global level)."""
        with self._catalog.write():
            if level is None:
                self._catalog.conn.execute(
                    "DELETE FROM schema_config WHERE subject = ?", (subject,)
                )
            else:
                self._catalog.conn.execute(
                    "INSERT INTO schema_config (subject, compatibility) VALUES (?, ?) "
                    "ON CONFLICT (subject) DO UPDATE SET compatibility = excluded.compatibility",
                    (subject, level),
                )

    # --- reading ------------------------------------------------------------------------

    def compatibility(self, subject: str) -> str | None:
        rows = self._catalog.query(
            "SELECT compatibility FROM schema_config WHERE subject = ?", (subject,)
        )
        return rows[0][0] if rows else None

    def by_id(self, schema_id: int) -> SchemaRow | None:
        rows = self._catalog.query(
            "SELECT id, schema_type, schema, refs, fingerprint FROM schemas WHERE id = ?",
            (schema_id,),
        )
        return SchemaRow(*rows[0]) if rows else None

    def uses_of(self, schema_id: int, deleted: bool = False) -> list[tuple[str, int]]:
        """(subject, version) of every version with the schema `schema_id`."""
        sql = "SELECT subject, version FROM schema_versions WHERE schema_id = ?"
        if not deleted:
            sql += " AND deleted = 0"
        return [
            (s, v) for s, v in self._catalog.query(sql + " ORDER BY subject, version", (schema_id,))
        ]

    def subjects(self, prefix: str = "", deleted: bool = False) -> list[str]:
        """Subjects with a live version (or any version, with `deleted`), sorted."""
        sql = "SELECT DISTINCT subject FROM schema_versions WHERE substr(subject, 1, ?) = ?"
        if not deleted:
            sql += " AND deleted = 0"
        return [r[0] for r in self._catalog.query(sql + " ORDER BY subject", (len(prefix), prefix))]

    def versions(self, subject: str, deleted: bool = False) -> list[VersionRow]:
        sql = f"{_VERSION_SQL} WHERE v.subject = ?"
        if not deleted:
            sql += " AND v.deleted = 0"
        return [_version(r) for r in self._catalog.query(sql + " ORDER BY v.version", (subject,))]

    def version(
        self, subject: str, version: int | None, deleted: bool = False
    ) -> VersionRow | None:
        """Version `version` of `subject` (None: the latest live one)."""
        if version is None:
            rows = self._catalog.query(
                f"{_VERSION_SQL} WHERE v.subject = ? AND v.deleted = 0 "
                "ORDER BY v.version DESC LIMIT 1",
                (subject,),
            )
        else:
            sql = f"{_VERSION_SQL} WHERE v.subject = ? AND v.version = ?"
            if not deleted:
                sql += " AND v.deleted = 0"
            rows = self._catalog.query(sql, (subject, version))
        return _version(rows[0]) if rows else None

    def find(
        self, subject: str, fingerprints: tuple[str, ...], deleted: bool = False
    ) -> VersionRow | None:
        """The newest version of `subject` with a schema of one of these fingerprints."""
        marks = ",".join("?" * len(fingerprints))
        sql = f"{_VERSION_SQL} WHERE v.subject = ? AND s.fingerprint IN ({marks})"
        if not deleted:
            sql += " AND v.deleted = 0"
        rows = self._catalog.query(
            sql + " ORDER BY v.version DESC LIMIT 1", (subject, *fingerprints)
        )
        return _version(rows[0]) if rows else None

    def id_of(self, fingerprint: str) -> int | None:
        """The id of the schema stored under `fingerprint`, if any."""
        rows = self._catalog.query("SELECT id FROM schemas WHERE fingerprint = ?", (fingerprint,))
        return int(rows[0][0]) if rows else None

    def referenced_by(self, subject: str, version: int) -> list[int]:
        """Ids of schemas whose references name this subject and version."""
        rows = self._catalog.query(
            "SELECT s.id FROM schemas s, json_each(s.refs) r "
            "WHERE json_extract(r.value, '$.subject') = ? "
            "AND json_extract(r.value, '$.version') = ? ORDER BY s.id",
            (subject, version),
        )
        return [r[0] for r in rows]
