"""Why a figure of the efficiency engine is null: one bit per reason.

Rows and fits carry a bit set of these reasons; :func:`note_strings` turns it into the
``efficiency_note`` / ``fit_note`` text, so that no null is left unexplained.
"""

from __future__ import annotations

from typing import Any

import numpy as np
import pyarrow as pa

NOTES = (
    "grouped: the time covers several collectives, no per-collective figures",
    "cputime: the time is CPU launch time (-C 1), no efficiency, fit or gap",
    "collective unknown or without an nccl-tests busbw factor",
    "nranks unknown",
    "time is not positive",
    "no hardware profile: pass --profile or --intra-bw/--inter-bw",
    "multi-node but the inter-node bandwidth I is unknown",
    "node count unknown: pass --nodes or --gpus-per-node",
    "ranks not divisible by nodes: the AIBooster ideal assumes equal ranks per node",
    "single rank: no data moves",
    "no alpha-beta fit: fewer than 3 distinct non-zero sizes, or a single rank",
    "0-byte row: no data moves, not fitted or judged",
    "hardware latency unknown: gap_latency_us includes it",
    "the Aurora data-path model gives host staging for all-reduce only: it stays in "
    "gap_bandwidth_us",
    "busbw above the AIBooster ideal (in-network reduction, or a profile too low)",
    "no size of this series is bandwidth-bound: beta is not measured",
    "busbw still rising at the largest size: no plateau, beta and efficiency are lower "
    "bounds",
    "faster than the fitted model at this size (above model): no unexplained time",
    "no ideal bandwidth is derived for this collective",
    "the ideal assumes hardware figures the log does not state (see the assumptions)",
    "the largest size's busbw is more than 10 % from the smaller sizes': no "
    "sustained level (plateau), beta and efficiency are not judged",
)
(
    GROUPED,
    CPUTIME,
    NO_COLL,
    NO_N,
    BAD_T,
    NO_PROFILE,
    NO_I,
    NO_Q,
    UNEVEN,
    ONE_RANK,
    NO_FIT,
    ZERO,
    NO_ALPHA,
    STAGING,
    ABOVE,
    FLAT,
    NO_PLATEAU,
    ABOVE_MODEL,
    NO_BOUND,
    ASSUMED,
    PEAK_ONLY,
) = (1 << i for i in range(len(NOTES)))


def note_strings(reasons: np.ndarray) -> pa.Array[Any]:
    """The text of each bit set in ``reasons`` joined by "; " (null for none)."""
    unique, inverse = np.unique(reasons, return_inverse=True)
    texts = [
        "; ".join(t for bit, t in enumerate(NOTES) if int(u) >> bit & 1) or None
        for u in unique
    ]
    return pa.array(texts, type=pa.string()).take(
        pa.array(inverse.astype(np.int64), type=pa.int64())
    )
