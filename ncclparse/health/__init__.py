"""Cluster health: judge runs, keep a history, compare, find slow hosts.

:mod:`~ncclparse.health.verdict` is the one verdict of a run (used by ``report`` and
``check``); :mod:`~ncclparse.health.check` applies :mod:`~ncclparse.health.rules`,
:mod:`~ncclparse.health.integrity` and history :mod:`~ncclparse.health.baselines` to
parsed results; :mod:`~ncclparse.health.history` stores results as a Parquet dataset;
:mod:`~ncclparse.health.blame` ranks hosts; :mod:`~ncclparse.health.compare` compares
two tables; :mod:`~ncclparse.health.outputs` renders results for CI and dashboards.
"""
