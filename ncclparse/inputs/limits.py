"""How many points each command takes: (exact_rows, max_points), read by
:mod:`ncclparse.inputs.points` and by the commands' help (no imports: a command's
help is printed without loading Arrow).

``check`` judges every run (one verdict each) and many logs are its ordinary input:
it merges early, and its points are judged in batches of runs
(ncclparse.health.check). ``report`` analyses and judges in the same batches,
keeping of each run only its overview row (and the points of the runs with a
section): a night of a 64-node pairwise sweep of four collectives (8,064 logs of
62 points: 499,968) is one page in bounded memory (benchmarks/README.md), and it
refuses only what ``check`` refuses too. ``analyze`` hands every analysed row back.
"""

REPORT_LIMITS = (5_000, 4_000_000)
ANALYZE_LIMITS = (250_000, 1_000_000)
CHECK_LIMITS = (50_000, 4_000_000)
