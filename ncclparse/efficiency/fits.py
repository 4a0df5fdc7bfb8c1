"""Alpha-beta (Hockney) fits per series: T(n) = alpha + n/beta.

Robust, relative-error weighted least squares for every series of a measurements
table at once (vectorized over series with bincount; no per-series Python loop).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pyarrow as pa

from ncclparse import columns as arr
from ncclparse.efficiency import notes as why
from ncclparse.schema import SERIES_KEYS

FIT_CLASSES = (
    "excellent",
    "useful",
    "assumptions violated",
)  # model error < 10 %, 10-30 %, > 30 %
FIT_COLUMNS = (
    *SERIES_KEYS,
    "points",
    "alpha_us",
    "beta_gbps",
    "crossover_bytes",
    "median_error_pct",
    "max_error_pct",
    "fit_class",
    "fit_note",
)
_HUBER_C = 1.345  # 95 % efficiency under normal errors
_MAD_TO_SIGMA = 1.4826
_ITERATIONS = 6


@dataclass(frozen=True, slots=True)
class Fit:
    alpha: np.ndarray  # per row, µs
    bandwidth_us: np.ndarray  # per row, size / beta
    model_time: np.ndarray
    error_pct: np.ndarray
    regime: np.ndarray  # 0 latency-bound, 1 bandwidth-bound, -1 none
    fit_class: np.ndarray
    reasons: np.ndarray
    table: pa.Table


def fit_series(
    table: pa.Table, eligible: np.ndarray, x: np.ndarray, y: np.ndarray
) -> Fit:
    """Fit T(n) = alpha + n/beta per series by Huber-reweighted relative least squares.

    Weights 1/T^2 make the fit minimise relative error, so small messages count
    (model error = |T_pred - T_actual| / T_actual). Huber weights on the
    relative residual (scale = 1.4826 x the series' median |residual|) tame outliers.
    0-byte rows are not fitted (nccl-tests returns before launching). A series needs 2
    distinct non-zero sizes. If the slope is not positive, beta is unbounded and alpha
    is the weighted mean time; if alpha comes out negative it is pinned at 0.
    """
    gid, ngroups, first = _series_ids(table, eligible)
    rows = gid >= 0
    fit_index = np.flatnonzero(rows & (x > 0) & np.isfinite(y) & (y > 0))
    # Sorted by (series, size) once: distinct sizes and medians then need no lexsort.
    fit_index = fit_index[np.lexsort((x[fit_index], gid[fit_index]))]
    g, xf, yf = gid[fit_index], x[fit_index], y[fit_index]
    points = np.bincount(g, minlength=ngroups)
    new_size = np.ones(g.shape, dtype=bool)
    new_size[1:] = (g[1:] != g[:-1]) | (xf[1:] != xf[:-1])
    distinct = np.bincount(g[new_size], minlength=ngroups)
    a, b, w = _irls(g, xf, yf, ngroups)
    flat = b <= 0
    sw = np.bincount(g, w, ngroups)
    with np.errstate(divide="ignore", invalid="ignore"):
        mean_y = np.bincount(g, w * yf, ngroups) / sw
        origin_b = np.bincount(g, w * xf * yf, ngroups) / np.bincount(
            g, w * xf * xf, ngroups
        )
    a, b = np.where(flat, mean_y, np.where(a < 0, 0.0, a)), np.where(flat, 0.0, b)
    b = np.where(~flat & (a == 0.0), np.where(np.isnan(origin_b), b, origin_b), b)
    valid = distinct >= 2
    a, b = np.where(valid, a, np.nan), np.where(valid, b, np.nan)

    alpha = np.full(x.shape, np.nan)
    slope = np.full(x.shape, np.nan)
    alpha[rows], slope[rows] = a[gid[rows]], b[gid[rows]]
    bandwidth_us = slope * x
    model = alpha + bandwidth_us
    with np.errstate(divide="ignore", invalid="ignore"):
        error = np.abs(model - y) / y * 100.0
    median = _group_median(g, error[fit_index], ngroups)
    worst = np.full(ngroups, np.nan)
    np.fmax.at(worst, g, error[fit_index])
    g_class = np.where(np.isnan(median), -1, np.digitize(median, [10.0, 30.0]))
    g_class = np.where(valid, g_class, -1)
    row_class = np.full(x.shape, -1)
    row_class[rows] = g_class[gid[rows]]
    known = ~np.isnan(model)
    regime = np.where(known, np.where((alpha > bandwidth_us) | (x == 0), 0, 1), -1)
    reasons = np.zeros(x.shape, dtype=np.int64)
    reasons[rows] |= np.where(valid, 0, why.NO_FIT)[gid[rows]]
    reasons[rows] |= np.where(flat & valid, why.FLAT, 0)[gid[rows]]
    reasons |= np.where(rows & (x == 0), why.ZERO, 0)

    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(b > 0, 1e-3 / b, np.nan)
    g_notes = np.where(valid, 0, why.NO_FIT) | np.where(valid & flat, why.FLAT, 0)
    keys = table.take(pa.array(first, type=pa.int64())).select(list(SERIES_KEYS))
    extra = {
        "points": pa.array(points, type=pa.int64()),
        "alpha_us": arr.floats(a),
        "beta_gbps": arr.floats(beta),
        "crossover_bytes": arr.floats(a * beta * 1e3),
        "median_error_pct": arr.floats(np.where(valid, median, np.nan)),
        "max_error_pct": arr.floats(np.where(valid, worst, np.nan)),
        "fit_class": arr.labels(g_class, FIT_CLASSES),
        "fit_note": why.note_strings(g_notes),
    }
    for name, column in extra.items():
        keys = keys.append_column(name, column)
    return Fit(alpha, bandwidth_us, model, error, regime, row_class, reasons, keys)


def _irls(
    g: np.ndarray, x: np.ndarray, y: np.ndarray, ngroups: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Huber IRLS of y = a + b x per group; returns a, b and the final row weights.

    ``g`` must be sorted. The robust scale is re-estimated in the first two rounds only
    and then held, which is what keeps this fast on a million rows.
    """
    base = 1.0 / (y * y)
    w = base
    a = b = cut = np.zeros(ngroups)
    for round_ in range(_ITERATIONS):
        a, b = _wls(g, x, y, w, ngroups)
        r = np.abs(y - a[g] - b[g] * x) / y
        if round_ < 2:
            scale = _MAD_TO_SIGMA * np.nan_to_num(_group_median(g, r, ngroups))
            # A floor keeps a perfect fit (scale 0) from down-weighting float noise.
            cut = _HUBER_C * np.maximum(scale, 1e-9)
        w = base * np.minimum(1.0, cut[g] / np.maximum(r, 1e-300))
    return a, b, w


def _wls(
    g: np.ndarray, x: np.ndarray, y: np.ndarray, w: np.ndarray, ngroups: int
) -> tuple[np.ndarray, np.ndarray]:
    """Weighted least squares per group, centred for numerical stability."""
    sw = np.bincount(g, w, ngroups)
    with np.errstate(divide="ignore", invalid="ignore"):
        mx = np.bincount(g, w * x, ngroups) / sw
        my = np.bincount(g, w * y, ngroups) / sw
        dx = x - mx[g]
        sxx = np.bincount(g, w * dx * dx, ngroups)
        sxy = np.bincount(g, w * dx * (y - my[g]), ngroups)
        b = np.where(sxx > 0, sxy / sxx, 0.0)
    return my - b * mx, b


def _group_median(g: np.ndarray, v: np.ndarray, ngroups: int) -> np.ndarray:
    """Median of ``v >= 0`` per group (NaN for empty groups); ``g`` must be sorted.

    One float argsort: v / (1 + v) maps [0, inf] into [0, 1] keeping order, so
    ``g + v / (1 + v)`` sorts by group, then by value within it.
    """
    with np.errstate(invalid="ignore"):
        order = np.argsort(g + np.nan_to_num(v / (1.0 + v), nan=1.0))
    counts = np.bincount(g, minlength=ngroups)
    starts = np.cumsum(counts) - counts
    sv = v[order]
    lo = starts + np.maximum(counts - 1, 0) // 2
    hi = starts + counts // 2
    out = np.full(ngroups, np.nan)
    has = counts > 0
    out[has] = (sv[lo[has]] + sv[hi[has]]) / 2
    return out


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
