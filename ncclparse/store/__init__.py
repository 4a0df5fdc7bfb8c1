"""Where results are kept: files written whole or not at all, result tables on disk,
local or object-store locations, and the nightly history dataset.

:mod:`~ncclparse.store.atomic` writes a file whole or leaves it as it was;
:mod:`~ncclparse.store.tables` reads and writes the result tables (Parquet, Arrow
IPC, CSV, JSON Lines); :mod:`~ncclparse.store.locations` names a local path or an
object-store URI; :mod:`~ncclparse.store.history` is the Parquet dataset of ingested
nights (layout, locks, compaction) that ``check``, ``compare`` and ``trend`` read;
:mod:`~ncclparse.store.spool` keeps parsed rows in a temporary file until ``ingest``
writes them.
"""
