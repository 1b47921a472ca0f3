"""The profile store: one SQLite file, `$ADVISOR_HOME/profiles.db` (default `~/.advisor`).

Append-only rows of (version, name, fingerprint key, catalog GPU, created_at, JSON body, body
sha256). Every write is one transaction in WAL mode with synchronous=FULL, so a writer killed
mid-write (SIGKILL, power loss) leaves the last committed state and readers never see half a
row; concurrent writers queue on the write lock (BEGIN IMMEDIATE, busy timeout). The tables carry
a schema version; a store written by a newer advisor is refused rather than misread. Reading never
creates files. Stdlib only: what the rows mean is advisor/profiles/use.py's business.
"""

from __future__ import annotations

import hashlib
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from advisor.core.errors import AdvisorError

SCHEMA_VERSION = 1
"""Version of the tables (and of the profile JSON); bump with a migration."""
BUSY_TIMEOUT_S = 30.0  # a writer waits this long for another writer's transaction


def advisor_home() -> Path:
    return Path(os.environ.get("ADVISOR_HOME") or Path.home() / ".advisor")


def store_path() -> Path:
    return advisor_home() / "profiles.db"


_SCHEMA = """
CREATE TABLE IF NOT EXISTS meta (key TEXT PRIMARY KEY, value TEXT NOT NULL);
CREATE TABLE IF NOT EXISTS profiles (
    version INTEGER PRIMARY KEY AUTOINCREMENT,
    name TEXT NOT NULL,
    fingerprint_key TEXT NOT NULL,
    catalog_gpu TEXT,
    created_at TEXT NOT NULL,
    body TEXT NOT NULL,
    body_sha256 TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS profiles_by_name ON profiles (name, version);
CREATE INDEX IF NOT EXISTS profiles_by_gpu ON profiles (catalog_gpu, version);
"""


@contextmanager
def _transaction(write: bool) -> Iterator[sqlite3.Connection]:
    """One transaction. Writes take the write lock up front (BEGIN IMMEDIATE: no lock-upgrade
    deadlock between two writers) and create or migrate the tables; reads see a snapshot."""
    path = store_path()
    if write:
        path.parent.mkdir(parents=True, exist_ok=True)
    con = sqlite3.connect(path, timeout=BUSY_TIMEOUT_S, isolation_level=None)
    try:
        _use_wal(con)
        con.execute("PRAGMA synchronous=FULL")
        con.execute("BEGIN IMMEDIATE" if write else "BEGIN")
        try:
            _check_schema(con, path, create=write)
            yield con
            con.execute("COMMIT")
        except BaseException:
            con.execute("ROLLBACK")
            raise
    finally:
        con.close()


def _use_wal(con: sqlite3.Connection) -> None:
    """Switch a new store to write-ahead logging. Switching needs an exclusive lock and SQLite
    may refuse it at once (no busy handler) while another writer creates the store: retry."""
    deadline = time.monotonic() + BUSY_TIMEOUT_S
    while True:
        try:
            if con.execute("PRAGMA journal_mode").fetchone()[0] != "wal":
                con.execute("PRAGMA journal_mode=WAL")
            return
        except sqlite3.OperationalError as exc:
            if "locked" not in str(exc) or time.monotonic() > deadline:
                raise
            time.sleep(0.01)


def _check_schema(con: sqlite3.Connection, path: Path, create: bool) -> None:
    if create:
        for statement in filter(str.strip, _SCHEMA.split(";")):
            con.execute(statement)  # CREATE ... IF NOT EXISTS: idempotent
        con.execute("INSERT OR IGNORE INTO meta VALUES ('schema_version', ?)", (str(SCHEMA_VERSION),))
    tables = {r[0] for r in con.execute("SELECT name FROM sqlite_master WHERE type = 'table'")}
    if "meta" not in tables:
        return
    row = con.execute("SELECT value FROM meta WHERE key = 'schema_version'").fetchone()
    if row is not None and int(row[0]) > SCHEMA_VERSION:
        raise AdvisorError(f"profile store {path} has schema {row[0]}, written by a newer "
                           f"advisor (this one reads {SCHEMA_VERSION})")


def _rows(sql: str, args: tuple = ()) -> list[tuple]:
    """Read-only query; an absent store reads as empty (reading never creates files)."""
    if not store_path().exists():
        return []
    with _transaction(write=False) as con:
        if not con.execute("SELECT 1 FROM sqlite_master WHERE name = 'profiles'").fetchone():
            return []  # created by a writer that never committed
        return con.execute(sql, args).fetchall()


def insert(name: str, fingerprint_key: str, catalog_gpu: str | None, created_at: str,
           body: str) -> int:
    """Append one profile version; returns its version number."""
    sha = hashlib.sha256(body.encode()).hexdigest()
    with _transaction(write=True) as con:
        cur = con.execute(
            "INSERT INTO profiles (name, fingerprint_key, catalog_gpu, created_at, body, body_sha256)"
            " VALUES (?, ?, ?, ?, ?, ?)", (name, fingerprint_key, catalog_gpu, created_at, body, sha))
        if cur.lastrowid is None:  # an INSERT always sets it
            raise AdvisorError(f"profile store {store_path()}: the insert returned no row id")
        return int(cur.lastrowid)


def bodies(name: str | None = None, catalog_gpu: str | None = None
           ) -> tuple[list[tuple[int, str]], list[tuple[int, str]]]:
    """(version, JSON body) newest first, filtered by name or catalog GPU, and the (version,
    reason) of rows whose body fails its checksum (edited on disk): those are left out, never
    raised, so one bad row cannot break the store."""
    where, args = [], []
    for column, value in (("name", name), ("catalog_gpu", catalog_gpu)):
        if value is not None:
            where.append(f"{column} = ?")
            args.append(value)
    sql = ("SELECT version, body, body_sha256 FROM profiles"
           + (" WHERE " + " AND ".join(where) if where else "") + " ORDER BY version DESC")
    good, corrupt = [], []
    for version, body, sha in _rows(sql, tuple(args)):
        if not isinstance(body, str) or hashlib.sha256(body.encode()).hexdigest() != sha:
            corrupt.append((version, "the stored body does not match its checksum (edited on disk?)"))
        else:
            good.append((version, body))
    return good, corrupt


def delete(name: str) -> int:
    """Remove every version of the profile `name`; returns how many rows went."""
    if not store_path().exists():
        return 0
    with _transaction(write=True) as con:
        return int(con.execute("DELETE FROM profiles WHERE name = ?", (name,)).rowcount)


def version_token() -> tuple[str, tuple[int, int, int] | None, tuple[int, int, int] | None]:
    """Changes whenever the store's content may have changed (any commit, by any process):
    the size and modification time of the database file and of its write-ahead log. Cheap
    (two stat calls), so answers cached by request can be keyed by it (api/service.py)."""
    def state(path: Path) -> tuple[int, int, int] | None:
        try:
            st = path.stat()
        except OSError:
            return None
        return (st.st_ino, st.st_size, st.st_mtime_ns)

    db = store_path()
    return (str(db), state(db), state(db.with_name(db.name + "-wal")))


def write_atomic(path: Path, text: str) -> None:
    """Write `text` to `path` so a reader sees the old file or the new one, never half of one."""
    path = Path(path)
    mode = path.stat().st_mode & 0o777 if path.exists() else 0o644  # mkstemp's 0600 is too strict
    fd, tmp = tempfile.mkstemp(dir=path.parent, prefix=f".{path.name}.", suffix=".tmp")
    try:
        os.fchmod(fd, mode)
        with os.fdopen(fd, "w") as f:
            f.write(text)
            f.flush()
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        Path(tmp).unlink(missing_ok=True)
        raise
