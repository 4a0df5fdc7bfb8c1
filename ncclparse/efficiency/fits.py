"""Alpha-beta fits per series, T(n) = alpha + n/beta, that describe the sweep.

A single least-squares line through a whole sweep describes none of it: the small sizes
pull beta down and the large ones push alpha above every small-message time. So each
parameter is read from the part of the sweep it governs (a segmented fit):

* beta is the sustained bandwidth of the **plateau**, the level the largest sizes
  hold: the largest sizes down to the first whose algbw (or any larger size's) is
  more than 10 % from the others' (a transient peak at mid sizes, or the rise, ends
  it): the least-squares slope of time over size there (the rate with
  the fixed cost taken out), kept between their median algbw and 1.25x the peak.
  The plateau is *reached* when it holds at least two sizes and the largest size's
  algbw rose less than 5 % over the next smaller one; otherwise beta (and any
  efficiency judged on it) is a lower bound.
* alpha is the latency of the **floor**: the median of ``T(n) - n/beta`` over the sizes
  whose time is within 1.5x of the series' fastest time.

Each comes with its spread (the lowest and highest value of the sizes it was read
from). The line gives alpha, beta, the crossover, the plateau and the regime; the
model time of each row is the series' expected curve
(:mod:`~ncclparse.efficiency.curve`: one segment per protocol range, the
``segments`` column), and so are the model errors and the fit class. A row's
regime comes from its measured time: latency-bound when alpha is at least half
of it, and every size of a series where none is bandwidth-bound (no beta, no
model time); a series of fewer than MIN_SIZES sizes has no fit, and its sizes
from BANDWIDTH_BOUND_BYTES up are bandwidth-bound and its plateau. Vectorized over
series (bincount, sorted group medians): no per-series Python loop.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ncclparse import _arrow as arr
from ncclparse.efficiency import notes as why
from ncclparse.efficiency.curve import expected_curve
from ncclparse.schema import NCCL_TOOLS, SERIES_KEYS

FIT_CLASSES = (
    "excellent",
    "useful",
    "assumptions violated",
)  # median relative error below 10 %, 10-30 %, above 30 %
FIT_COLUMNS = (
    *SERIES_KEYS,
    "points",
    "alpha_us",
    "alpha_low_us",
    "alpha_high_us",
    "beta_gbps",
    "beta_low_gbps",
    "beta_high_gbps",
    "beta_busbw_gbps",
    "plateau_points",
    "plateau_reached",
    "crossover_bytes",
    "median_error_pct",
    "max_error_pct",
    "fit_class",
    "fit_note",
    "segments",
)
PLATEAU = 0.9  # sizes within 10 % of the peak algbw form the plateau
STILL_RISING = 1.05  # the largest size 5 % above the next: no plateau yet
FLOOR = 1.5  # sizes within 1.5x of the fastest time form the latency floor
MIN_SIZES = 3  # distinct non-zero sizes a fit takes
# A sweep too short to fit (acceptance scripts run `-b 10G -e 10G`) is judged at its
# sizes from 1 GiB up: there NCCL's own latency model (hundreds of µs at most,
# src/graph/tuning.cc) is a few % of the time, and nccl-tests' plateau is reached
# from ~256 MB-1 GB (sjeaugey, NVIDIA/nccl-tests #212).
BANDWIDTH_BOUND_BYTES = 1 << 30


@dataclass(frozen=True, slots=True)
class Fit:
    """Per row: alpha (µs), the bandwidth term n/beta (µs), the model time, its
    relative error (%), regime (0 latency-, 1 bandwidth-bound, -1 none), fit class
    index, whether the row is on its series' reached plateau, reason bits; and the
    per-series table (FIT_COLUMNS)."""

    alpha: np.ndarray
    bandwidth_us: np.ndarray
    model_time: np.ndarray
    error_pct: np.ndarray
    regime: np.ndarray
    fit_class: np.ndarray
    plateau: np.ndarray
    reasons: np.ndarray
    table: pa.Table


def fit_series(
    table: pa.Table,
    eligible: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    factor: np.ndarray,
) -> Fit:
    """Fit every series (``SERIES_KEYS``) of ``table`` among the ``eligible`` rows.

    ``x`` sizes in bytes, ``y`` times in µs, ``factor`` the busbw factor of each row
    (for beta in busbw units). 0-byte rows and non-positive times are not fitted. A
    series needs 3 distinct sizes and more than one rank.
    """
    gid, ngroups, first = _series_ids(table, eligible)
    rows = gid >= 0
    nranks = arr.num(table, "nranks")
    fit_index = np.flatnonzero(rows & (x > 0) & np.isfinite(y) & (y > 0))
    fit_index = fit_index[np.lexsort((x[fit_index], gid[fit_index]))]
    g, xf, yf = gid[fit_index], x[fit_index], y[fit_index]
    counts = np.bincount(g, minlength=ngroups)
    new_size = np.ones(g.shape, dtype=bool)
    new_size[1:] = (g[1:] != g[:-1]) | (xf[1:] != xf[:-1])
    distinct = np.bincount(g[new_size], minlength=ngroups)
    multi = np.zeros(ngroups, dtype=bool)
    np.logical_or.at(multi, g, nranks[fit_index] > 1)
    valid = (distinct >= MIN_SIZES) & multi

    # Plateau: beta in bytes/µs.
    alg = xf / yf
    peak = np.full(ngroups, -np.inf)
    np.maximum.at(peak, g, alg)
    on_plateau = _sustained(g, alg)
    plateau_points = np.bincount(g[on_plateau], minlength=ngroups)
    median_alg = _group_median(g[on_plateau], alg[on_plateau], ngroups)
    beta_low, beta_high = _extremes(g[on_plateau], alg[on_plateau], ngroups)
    # The plateau's slope is the sustained rate without the latency in each time;
    # kept between the median algbw (a latency-free rate is never lower) and 1.25x
    # the peak (two nearly equal times must not make it unbounded).
    slope = _slope(g[on_plateau], xf[on_plateau], yf[on_plateau], ngroups)
    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.clip(np.where(slope > 0, 1 / slope, np.inf), median_alg, 1.25 * peak)
    ends = np.cumsum(counts) - 1
    has = counts >= 2
    last = np.full(ngroups, np.nan)
    before = np.full(ngroups, np.nan)
    last[has] = alg[ends[has]]
    before[has] = alg[ends[has] - 1]
    reached = valid & (plateau_points >= 2) & (last < STILL_RISING * before)

    # Floor: alpha in µs.
    fastest = np.full(ngroups, np.inf)
    np.minimum.at(fastest, g, yf)
    floor = yf <= FLOOR * fastest[g]
    spare = yf - xf / beta[g]
    alpha = np.maximum(_group_median(g[floor], spare[floor], ngroups), 0.0)
    alpha_low, alpha_high = _extremes(g[floor], np.maximum(spare[floor], 0), ngroups)

    # Beta is measured only where some size is bandwidth-bound (n/beta >= alpha).
    bound_rows = xf / beta[g] >= alpha[g]
    measured = np.bincount(g[bound_rows], minlength=ngroups) > 0
    beta_ok = valid & measured
    alpha = np.where(valid, alpha, np.nan)
    beta = np.where(beta_ok, beta, np.nan)

    per_row = {"alpha": alpha, "reached": np.where(valid, reached, False)}
    alpha_r, reached_r = (
        _spread(per_row[k], gid, rows, x.shape) for k in ("alpha", "reached")
    )
    # The model is the expected curve (its segment's alpha and n/beta per row); the
    # regime stays the single line's.
    tools = table.column("tool").take(pa.array(first, type=pa.int64()))
    gpu = np.isin(
        arr.fill_null(tools, "").to_numpy(zero_copy_only=False), list(NCCL_TOOLS)
    )
    curve = expected_curve(gid, x, fit_index, y, beta, gpu)
    on_curve = curve.segment >= 0
    seg_alpha = np.where(on_curve, curve.alpha, alpha_r)
    bandwidth_us = curve.bandwidth_us
    model = curve.model_time
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.abs(model - y) / y * 100.0
        latency_share = alpha_r / y
    known = ~np.isnan(model) & (x > 0)
    regime = np.where(known, np.where(latency_share >= 0.5, 0, 1), -1)
    # A series where no size is bandwidth-bound (n/beta < alpha for all: beta not
    # measured) has no model time, yet every size of it is latency-bound.
    flat = _spread((valid & ~measured).astype(np.float64), gid, rows, x.shape) > 0
    regime = np.where(flat & (x > 0), 0, regime)
    start = np.full(ngroups, np.inf)
    np.minimum.at(start, g[on_plateau], xf[on_plateau])
    start_r = _spread(np.where(valid, start, np.nan), gid, rows, x.shape)
    plateau_row = (reached_r > 0) & (x >= start_r) & known
    short = _spread((~valid).astype(np.float64), gid, rows, x.shape) > 0
    large = short & (x >= BANDWIDTH_BOUND_BYTES) & np.isfinite(y) & (y > 0)
    regime = np.where(large, 1, regime)
    plateau_row = plateau_row | large

    median = _group_median(g, error[fit_index], ngroups)
    worst = np.full(ngroups, np.nan)
    np.fmax.at(worst, g, error[fit_index])
    g_class = np.where(np.isnan(median), -1, np.digitize(median, [10.0, 30.0]))
    g_class = np.where(beta_ok, g_class, -1)
    row_class = _spread(g_class.astype(np.float64), gid, rows, x.shape)
    row_class = np.where(np.isnan(row_class), -1, row_class).astype(np.int64)

    g_notes = np.where(valid, 0, why.NO_FIT)
    g_notes |= np.where(valid & ~measured, why.FLAT, 0)
    # Not reached: still rising, or (not rising) no second size near the peak.
    rising = last >= STILL_RISING * before
    g_notes |= np.where(beta_ok & ~reached & rising, why.NO_PLATEAU, 0)
    g_notes |= np.where(beta_ok & ~reached & ~rising, why.PEAK_ONLY, 0)
    reasons = np.zeros(x.shape, dtype=np.int64)
    reasons[rows] |= g_notes[gid[rows]]
    reasons |= np.where(rows & (x == 0), why.ZERO, 0)
    reasons |= np.where(known & (model > y), why.ABOVE_MODEL, 0)

    gfactor = np.full(ngroups, np.nan)
    gfactor[g] = factor[fit_index]
    gbps = 1e-3  # bytes/µs to GB/s
    keys = table.take(pa.array(first, type=pa.int64())).select(list(SERIES_KEYS))
    extra = {
        "points": pa.array(counts, type=pa.int64()),
        "alpha_us": arr.floats(alpha),
        "alpha_low_us": arr.floats(np.where(valid, alpha_low, np.nan)),
        "alpha_high_us": arr.floats(np.where(valid, alpha_high, np.nan)),
        "beta_gbps": arr.floats(beta * gbps),
        "beta_low_gbps": arr.floats(np.where(beta_ok, beta_low * gbps, np.nan)),
        "beta_high_gbps": arr.floats(np.where(beta_ok, beta_high * gbps, np.nan)),
        "beta_busbw_gbps": arr.floats(beta * gbps * gfactor),
        "plateau_points": pa.array(np.where(beta_ok, plateau_points, 0), pa.int64()),
        "plateau_reached": pa.array(reached, type=pa.bool_()),
        "crossover_bytes": arr.floats(alpha * beta),
        "median_error_pct": arr.floats(np.where(beta_ok, median, np.nan)),
        "max_error_pct": arr.floats(np.where(beta_ok, worst, np.nan)),
        "fit_class": arr.labels(g_class, FIT_CLASSES),
        "fit_note": why.note_strings(g_notes),
        "segments": curve.segments,
    }
    for name, column in extra.items():
        keys = keys.append_column(name, column)
    return Fit(
        seg_alpha,
        bandwidth_us,
        model,
        error,
        regime,
        row_class,
        plateau_row,
        reasons,
        keys,
    )


def _slope(g: np.ndarray, x: np.ndarray, y: np.ndarray, ngroups: int) -> np.ndarray:
    """Least-squares slope of y over x per group (NaN with fewer than 2 sizes)."""
    n = np.bincount(g, minlength=ngroups).astype(np.float64)
    with np.errstate(divide="ignore", invalid="ignore"):
        mx = np.bincount(g, x, ngroups) / n
        my = np.bincount(g, y, ngroups) / n
        dx = x - mx[g]
        sxx = np.bincount(g, dx * dx, ngroups)
        sxy = np.bincount(g, dx * (y - my[g]), ngroups)
        return np.where(sxx > 0, sxy / sxx, np.nan)


def _spread(
    values: np.ndarray, gid: np.ndarray, rows: np.ndarray, shape: tuple[int, ...]
) -> np.ndarray:
    """A per-series value on every row of the series (NaN elsewhere)."""
    out = np.full(shape, np.nan)
    out[rows] = values[gid[rows]].astype(np.float64)
    return out


def _extremes(
    g: np.ndarray, v: np.ndarray, ngroups: int
) -> tuple[np.ndarray, np.ndarray]:
    low = np.full(ngroups, np.inf)
    high = np.full(ngroups, -np.inf)
    np.minimum.at(low, g, v)
    np.maximum.at(high, g, v)
    return np.where(np.isinf(low), np.nan, low), np.where(np.isinf(high), np.nan, high)


def _group_median(g: np.ndarray, v: np.ndarray, ngroups: int) -> np.ndarray:
    """Median of ``v`` per group (NaN for empty groups); ``g`` must be sorted.

    One stable sort by value, then a stable sort by group keeps values ordered within
    each group.
    """
    order = np.argsort(v, kind="stable")
    order = order[np.argsort(g[order], kind="stable")]
    counts = np.bincount(g, minlength=ngroups)
    starts = np.cumsum(counts) - counts
    sv = v[order]
    lo = starts + np.maximum(counts - 1, 0) // 2
    hi = starts + counts // 2
    out = np.full(ngroups, np.nan)
    present = counts > 0
    out[present] = (sv[lo[present]] + sv[hi[present]]) / 2
    return out


def _sustained(g: np.ndarray, alg: np.ndarray) -> np.ndarray:
    """Rows sorted by series ``g`` then size: True for the plateau's, the longest run
    of largest sizes whose algbw all lie within PLATEAU of the run's highest (a
    segmented running max and min from the largest size down, each series offset
    so that the running values never cross into another's)."""
    if not len(g):
        return np.zeros(0, dtype=bool)
    back = slice(None, None, -1)
    rg, ra = g[back], alg[back]
    step = 2.0 * float(np.max(np.abs(ra))) + 1.0
    offset = (int(g.max()) - rg).astype(np.float64) * step
    high = np.maximum.accumulate(ra + offset) - offset
    low = -(np.maximum.accumulate(-ra + offset) - offset)
    return (low >= PLATEAU * high)[back]


def _series_ids(
    table: pa.Table, mask: np.ndarray
) -> tuple[np.ndarray, int, np.ndarray]:
    """Group id per row (-1 outside ``mask``), group count, first row of each group."""
    combined = np.zeros(table.num_rows, dtype=np.int64)
    span, stacked = 1, []
    for name in SERIES_KEYS:
        codes, cardinality = arr.dictionary_codes(table.column(name))
        stacked.append(codes)
        combined = combined * cardinality + codes
        span *= cardinality
    if span >= 2**62:  # pragma: no cover - needs ~1e18 distinct key combinations
        combined = np.unique(np.stack(stacked, axis=1), axis=0, return_inverse=True)[1]
    gid = np.full(table.num_rows, -1, dtype=np.int64)
    if not mask.any():
        return gid, 0, np.zeros(0, dtype=np.int64)
    _, first_local, inverse = np.unique(
        combined[mask], return_index=True, return_inverse=True
    )
    gid[mask] = inverse
    return gid, len(first_local), np.flatnonzero(mask)[first_local]
