"""Cluster health: judging only (the outputs are the report's, the history the store's).

:mod:`~ncclparse.health.verdict` is the one verdict of a run (used by ``report`` and
``check``); :mod:`~ncclparse.health.check` applies :mod:`~ncclparse.health.rules`,
:mod:`~ncclparse.health.integrity` and history :mod:`~ncclparse.health.baselines`
(read from :mod:`~ncclparse.store.history`) to parsed results;
:mod:`~ncclparse.health.blame` ranks hosts; :mod:`~ncclparse.health.compare` compares
two tables.
"""
