"""SQLite's WAL checkpoints in a background thread, not in the thread that commits.

In WAL mode SQLite copies committed pages back into the database file (a checkpoint) at the end of the commit
that takes the log past ``wal_autocheckpoint`` pages (1,000 by default), and with ``synchronous=NORMAL`` that
checkpoint is also the one fsync. A spider batch writes about 8 MB (compressed pages, texts, links), so nearly
every batch commit paid a checkpoint on the extracting thread: 60-80 ms each, 1.5-2 % of an iteration over the
news corpus (the 25 commits of an iteration over 600 prefetched pages took 0.26-0.32 s; with this thread,
0.021-0.024 s). SQLite's documentation names the alternative: turn the automatic checkpoint down and "run
checkpoints ... in a separate thread or process" (https://sqlite.org/wal.html, "Automatic Checkpoint").
Python's sqlite3 releases the GIL while SQLite works, so the checkpoint runs on another core while the
committing thread goes on.

A PASSIVE checkpoint waits for no reader or writer. SQLite's own checkpoint on commit stays as a safety net at
ten times its default, so the log stays bounded even if this thread falls behind or is not running (in a process
forked after the store was opened, say). When the last connection closes, SQLite checkpoints whatever is left.
"""

from __future__ import annotations

import logging
import sqlite3
import threading

from sqlalchemy import Engine, event

# SQLite's checkpoint on commit, kept as a safety net: 10x its default of 1,000 pages (about 40 MB of log)
FALLBACK_AUTOCHECKPOINT_PAGES = 10_000
# The engine's commit event fires just before SQLite commits: the checkpoint waits this long, and so also runs at
# most about twice a second however often the store commits.
CHECKPOINT_DELAY_SECONDS = 0.5

log = logging.getLogger(__name__)


class WalCheckpointer:
    """One daemon thread per SQLite database file of an engine: after commits, a PASSIVE checkpoint on its own
    connection. Start with :meth:`for_engine`; :meth:`stop` when the engine is disposed."""

    def __init__(self, database_path: str) -> None:
        self.database_path = database_path
        self._committed = threading.Event()
        self._stopping = threading.Event()
        self._thread = threading.Thread(target=self._run, name="topicmap-sqlite-checkpoint", daemon=True)
        self._thread.start()

    @classmethod
    def for_engine(cls, engine: Engine) -> WalCheckpointer | None:
        """A checkpointer woken by ``engine``'s commits; None for an in-memory or URI-named database."""
        database = engine.url.database or ""
        if database in ("", ":memory:") or engine.url.query.get("uri"):
            return None
        checkpointer = cls(database)
        event.listen(engine, "commit", checkpointer.committed)
        return checkpointer

    def committed(self, _connection: object = None) -> None:
        self._committed.set()

    def stop(self) -> None:
        self._stopping.set()
        self._committed.set()
        self._thread.join()

    def _run(self) -> None:
        connection: sqlite3.Connection | None = None
        try:
            while True:
                self._committed.wait()
                # cleared before the stop is looked at: cleared after, it could erase the wake-up of a stop()
                # that came meanwhile, and the thread would wait for a commit forever while stop() joins it
                self._committed.clear()
                if self._stopping.wait(CHECKPOINT_DELAY_SECONDS):
                    return
                try:
                    if connection is None:
                        connection = sqlite3.connect(self.database_path, timeout=30, isolation_level=None)
                    connection.execute("PRAGMA wal_checkpoint(PASSIVE)").fetchall()
                except sqlite3.Error as exc:
                    # the next commit tries again, and SQLite's own checkpoint backs this thread up
                    log.warning("SQLite checkpoint of %s failed: %s", self.database_path, exc)
        finally:
            if connection is not None:
                connection.close()
