"""The expected curve of a series: up to three alpha-beta segments over size ranges.

NCCL does not run one algorithm at every size: for each call its tuning model
(``src/graph/tuning.cc`` in NVIDIA/nccl) predicts ``latency + bytes / bandwidth`` for
every enabled (algorithm, protocol) pair, each with its own latency and bandwidth,
and runs the fastest. Small messages go LL (lowest latency, half the bandwidth), mid
sizes LL128, large ones Simple (the full bandwidth, the highest latency). A measured
sweep is therefore a few alpha-beta lines, one per size range, joined where NCCL
switches; a single line through it leaves the mid sizes unexplained.

So each series gets up to :data:`MAX_SEGMENTS` segments over contiguous size ranges,
each a line T(n) = alpha + n/beta fitted on its own sizes by least squares on the
relative error, with alpha >= 0 and beta at most 1.25x the series' plateau beta (the
single fit's, :mod:`~ncclparse.efficiency.fits`). The breakpoints are searched
exhaustively (every split between distinct sizes, each segment at least
:data:`MIN_SEGMENT` sizes) and the segment count is chosen by the Bayesian
information criterion on the relative errors, with a 1 % noise floor: an extra
segment (two parameters and a breakpoint) must cut the summed squared relative error
by more than noise would. A clean single-protocol sweep stays one segment. A final
pass refits each segment without the sizes more than max(10 %, 3 x RMS) off it, so
one slow size does not bend its segment.

The segments of NCCL and RCCL sweeps are named by the protocol NCCL's model would
typically choose there (:func:`protocol_names`): an assumption from size ranges, the
log does not say which protocol ran. Other tools' are "segment 1" to "segment 3".

Vectorized: the sums each segment's fit needs are prefix sums per series; series
with the same number of distinct sizes are stacked and their every candidate split is
evaluated at once.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import numpy as np
import pyarrow as pa

MAX_SEGMENTS = 3
MIN_SEGMENT = 3  # distinct sizes a segment holds
NOISE = 0.01  # relative error below which a size is fitted as well as can be
OUTLIER = 0.10  # a size further off its segment (and > 3x RMS) is refitted without
MAX_CANDIDATES = 48  # breakpoints considered per series (evenly spaced beyond)
LL_END = 16 << 20  # two segments breaking below 16 MiB: LL, Simple (else LL128)
_CHUNK = 1 << 18  # cells (series x candidate splits) evaluated per array
SEGMENT_TYPE = pa.list_(
    pa.struct(
        [
            pa.field("protocol", pa.string()),
            pa.field("from_bytes", pa.int64()),
            pa.field("to_bytes", pa.int64()),
            pa.field("alpha_us", pa.float64()),
            pa.field("beta_gbps", pa.float64()),
        ]
    )
)


@dataclass(frozen=True, slots=True)
class Curve:
    """Per row: the segment's alpha (µs), its n/beta (µs), the model time and the
    segment index (-1 without a curve); per series the ``segments`` column."""

    alpha: np.ndarray
    bandwidth_us: np.ndarray
    model_time: np.ndarray
    segment: np.ndarray
    segments: pa.Array[Any]


def protocol_names(count: int, second_from: float, gpu: bool) -> tuple[str, ...]:
    """What each of ``count`` segments is called, in size order.

    NCCL/RCCL (``gpu``): three segments are LL, LL128, Simple (the order NCCL's model
    picks them as size grows). Two are LL, Simple when the second starts below
    :data:`LL_END`, else LL128, Simple: in NCCL's model for 2 x 8 H100 (Ring) LL
    hands over to Simple at 3.3 MB when LL128 is off, LL128 to Simple at 72 MB,
    and 16 MiB lies between (docs/efficiency.md). One segment is Simple (the
    protocol of bandwidth-bound sizes). Other tools: "segment 1" .. "segment 3".
    """
    if not gpu:
        return tuple(f"segment {i + 1}" for i in range(count))
    if count == 3:
        return ("LL", "LL128", "Simple")
    if count == 2:
        return ("LL", "Simple") if second_from < LL_END else ("LL128", "Simple")
    return ("Simple",)


def expected_curve(
    gid: np.ndarray,
    x: np.ndarray,
    fit_index: np.ndarray,
    y: np.ndarray,
    beta: np.ndarray,
    gpu: np.ndarray,
) -> Curve:
    """Fit the segments of every series with a finite plateau ``beta``.

    ``gid`` series id per row (-1 outside any), ``x`` sizes in bytes, ``y`` times in
    µs (every row); ``fit_index`` the rows fitted, sorted by series then size (every
    series in it has at least :data:`MIN_SEGMENT` distinct sizes); ``beta`` the
    plateau beta per series in bytes/µs (NaN: no curve); ``gpu`` per series whether
    the tool is nccl-tests or rccl-tests (names the segments).
    """
    ngroups = len(beta)
    active = np.isfinite(beta) & (beta > 0)
    index = fit_index[active[gid[fit_index]]]
    g, xf, yf = gid[index], x[index], y[index]
    with np.errstate(divide="ignore"):
        s_min = np.where(active, 1.0 / (1.25 * beta), np.nan)

    # One entry per (series, distinct size): the sums its rows add to a fit.
    new = np.ones(len(g), dtype=bool)
    new[1:] = (g[1:] != g[:-1]) | (xf[1:] != xf[:-1])
    entry = np.cumsum(new) - 1
    sums = _terms(xf, yf, entry, int(new.sum()), bool(new.all()))
    eg, ex = g[new], xf[new].astype(np.float64)
    m = np.bincount(eg, minlength=ngroups)
    start = np.cumsum(m) - m

    count = np.zeros(ngroups, dtype=np.int64)
    cuts = np.zeros((ngroups, MAX_SEGMENTS - 1), dtype=np.int64)  # distinct-size index
    chosen = np.zeros((sums.shape[0], ngroups, MAX_SEGMENTS))  # each segment's sums
    for size in np.unique(m[active]):
        members = np.flatnonzero(active & (m == size))
        for chunk in np.array_split(members, -(-len(members) * size**2 // _CHUNK)):
            k, c, part = _segmentation(sums, start[chunk], int(size), s_min[chunk])
            count[chunk], cuts[chunk], chosen[:, chunk] = k, c, part

    # From-sizes of segments 2 and 3 (inf when absent); every row's segment.
    bounds = np.full((ngroups, MAX_SEGMENTS - 1), np.inf)
    for j in range(MAX_SEGMENTS - 1):
        has = active & (count > j + 1)
        bounds[has, j] = ex[start[has] + cuts[has, j]]
    rows = gid >= 0
    segment = np.full(x.shape, -1, dtype=np.int64)
    on = rows.copy()
    on[rows] = active[gid[rows]]
    segment[on] = (x[on, None] >= bounds[gid[on]]).sum(axis=1)
    alpha, slope = _final_fit(chosen, g, xf, yf, segment[index], s_min)

    cell = gid[on] * MAX_SEGMENTS + segment[on]
    row_alpha = np.full(x.shape, np.nan)
    row_bw = np.full(x.shape, np.nan)
    row_alpha[on] = alpha.ravel()[cell]
    row_bw[on] = slope.ravel()[cell] * x[on]
    segments = _segments_column(count, cuts, alpha, slope, ex, start, m, gpu)
    return Curve(row_alpha, row_bw, row_alpha + row_bw, segment, segments)


def _terms(
    x: np.ndarray, y: np.ndarray, entry: np.ndarray, n: int, distinct: bool = False
) -> np.ndarray:
    """Per entry (columns; ``distinct``: one row each), the sums of 1/y², x/y²,
    x²/y², 1/y, x/y and 1 over its rows (rows of the result): the relative residual
    (alpha + s x)/y - 1 is linear in alpha and s."""
    inv = 1.0 / y
    ratio = x * inv
    parts = (inv * inv, ratio * inv, ratio * ratio, inv, ratio, np.ones_like(y))
    if distinct:
        stacked: np.ndarray = np.stack(parts)
        return stacked
    out = np.empty((len(parts), n))
    for i, part in enumerate(parts):
        out[i] = np.bincount(entry, part, n)
    return out


def _segmentation(
    sums: np.ndarray, start: np.ndarray, m: int, s_min: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Segment count and cuts for series of ``m`` distinct sizes each, starting at
    ``start`` in ``sums``: the least BIC over one, two and three segments; and the
    sums of each chosen segment (terms x series x segment)."""
    series = len(start)
    prefix = np.zeros((sums.shape[0], series, m + 1))
    prefix[:, :, 1:] = np.cumsum(sums[:, start[:, None] + np.arange(m)], axis=2)
    points = prefix[5, :, m]
    floor = points * NOISE**2
    bound = s_min[:, None]
    rows = np.arange(series)

    def cost(lo: np.ndarray, hi: np.ndarray, at: Any = slice(None)) -> np.ndarray:
        part = prefix[:, at][:, :, hi] - prefix[:, at][:, :, lo]
        return _solve(part, bound[at])[2]

    def chosen() -> np.ndarray:
        edges = np.concatenate([np.zeros((series, 1), np.int64), cuts], axis=1)
        after = np.full((series, MAX_SEGMENTS), m)
        inner = np.arange(1, MAX_SEGMENTS) < count[:, None]
        after[:, :-1] = np.where(inner, cuts, m)
        part = prefix[:, rows[:, None], after] - prefix[:, rows[:, None], edges]
        return np.where(np.arange(MAX_SEGMENTS) < count[:, None], part, 0.0)

    def score(sse: np.ndarray, k: int, at: Any = slice(None)) -> np.ndarray:
        # BIC: n ln(SSE/n) + (3k - 1) ln n (two parameters a segment, k-1 breaks).
        n = points[at]
        value: np.ndarray = n * np.log((sse + floor[at]) / n)
        total: np.ndarray = value + (3 * k - 1) * np.log(n)
        return total

    best = score(cost(np.array([0]), np.array([m]))[:, 0], 1)
    count = np.ones(series, dtype=np.int64)
    cuts = np.zeros((series, MAX_SEGMENTS - 1), dtype=np.int64)
    splits = _candidates(m)
    if len(splits) == 0:
        return count, cuts, chosen()
    head = cost(np.zeros_like(splits), splits)
    tail = cost(splits, np.full_like(splits, m))
    # For a given count the least error has the least score: pick, then score.
    two = head + tail
    pick = np.argmin(two, axis=1)
    scored = score(two[rows, pick], 2)
    better = scored < best
    best = np.where(better, scored, best)
    count[better], cuts[better, 0] = 2, splits[pick[better]]
    left, right = np.triu_indices(len(splits), 1)
    wide = splits[right] - splits[left] >= MIN_SEGMENT
    left, right = left[wide], right[wide]
    # Only where three segments with no error at all would score better.
    hope = np.flatnonzero(score(np.zeros(series), 3) < best)
    if len(left) == 0 or len(hope) == 0:
        return count, cuts, chosen()
    middle = cost(splits[left], splits[right], hope)
    three = head[hope][:, left] + middle + tail[hope][:, right]
    pick = np.argmin(three, axis=1)
    better = score(three[np.arange(len(hope)), pick], 3, hope) < best[hope]
    won, pick = hope[better], pick[better]
    count[won] = 3
    cuts[won, 0] = splits[left[pick]]
    cuts[won, 1] = splits[right[pick]]
    return count, cuts, chosen()


def _candidates(m: int) -> np.ndarray:
    """Distinct-size indices where a segment may start (each side keeps at least
    MIN_SEGMENT sizes); at most MAX_CANDIDATES, evenly spaced."""
    splits = np.arange(MIN_SEGMENT, m - MIN_SEGMENT + 1)
    if len(splits) > MAX_CANDIDATES:
        pick = np.round(np.linspace(0, len(splits) - 1, MAX_CANDIDATES)).astype(int)
        splits = splits[np.unique(pick)]
    return splits


def _solve(
    sums: np.ndarray, s_min: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Least squares of the relative error with alpha >= 0 and slope >= ``s_min``.

    ``sums`` stacks A = Σ1/y², B = Σx/y², C = Σx²/y², D = Σ1/y, E = Σx/y, N = Σ1;
    the summed squared relative error of (alpha, s) is
    alpha²A + s²C + N + 2 alpha s B - 2 alpha D - 2 s E. The unconstrained optimum
    when it is feasible, else the better of the two edges (alpha = 0; s = s_min),
    each at its own clamped optimum (the error is convex). Returns alpha, s, error.
    """
    a, b, c, d, e, n = sums
    with np.errstate(divide="ignore", invalid="ignore"):
        det = a * c - b * b
        alpha = (c * d - b * e) / det
        slope = (a * e - b * d) / det
        inside = (det > 1e-12 * a * c) & (alpha >= 0) & (slope >= s_min)
        if inside.all():
            # At the optimum the error is N - alpha D - s E.
            return alpha, slope, np.maximum(n - alpha * d - slope * e, 0.0)
        edge_s = np.maximum(e / c, s_min)  # alpha = 0
        edge_a = np.maximum((d - b * s_min) / a, 0.0)  # s = s_min
    on_s = n + edge_s * (edge_s * c - 2 * e)
    on_a = (
        n + edge_a * (edge_a * a - 2 * d) + s_min * (s_min * c - 2 * e + 2 * edge_a * b)
    )
    use_a = on_a < on_s
    free = n - alpha * d - slope * e
    alpha = np.where(inside, alpha, np.where(use_a, edge_a, 0.0))
    slope = np.where(inside, slope, np.where(use_a, s_min, edge_s))
    error = np.where(inside, free, np.where(use_a, on_a, on_s))
    return alpha, slope, np.maximum(error, 0.0)


def _final_fit(
    chosen: np.ndarray,
    g: np.ndarray,
    x: np.ndarray,
    y: np.ndarray,
    segment: np.ndarray,
    s_min: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Each (series, segment)'s alpha and slope, per [series, segment]: fitted on
    its rows (``chosen``: their sums), then again without the rows off it by more
    than max(OUTLIER, 3 x the series' RMS relative error) when at least two sizes
    remain."""
    ngroups = chosen.shape[1]
    cells = ngroups * MAX_SEGMENTS
    sums = chosen.reshape(chosen.shape[0], cells)
    cell = g * MAX_SEGMENTS + segment
    bound = np.repeat(s_min, MAX_SEGMENTS)
    alpha, slope, _ = _solve(sums, bound)
    error = (alpha[cell] + slope[cell] * x) / y - 1
    with np.errstate(divide="ignore", invalid="ignore"):
        rms = np.sqrt(np.bincount(g, error**2, ngroups) / np.bincount(g, None, ngroups))
    keep = np.abs(error) <= np.maximum(OUTLIER, 3 * rms[g])
    if not keep.all():
        # The sums without the few rows left out.
        out = np.flatnonzero(~keep)
        sums = sums - _terms(x[out], y[out], cell[out], cells)
        again, steeper, _ = _solve(sums, bound)
        # Two sizes at least, else the first fit stands (rows are sorted by size
        # within a cell: compare its first and last kept size).
        kept = np.flatnonzero(keep)
        ends = np.flatnonzero(np.diff(cell[kept], append=-1) != 0)
        firsts = np.concatenate([[0], ends[:-1] + 1])
        spread = np.zeros(cells, dtype=bool)
        spread[cell[kept][ends]] = x[kept][ends] > x[kept][firsts]
        ok = spread & np.isfinite(again) & np.isfinite(steeper)
        alpha, slope = np.where(ok, again, alpha), np.where(ok, steeper, slope)
    return alpha.reshape(ngroups, MAX_SEGMENTS), slope.reshape(ngroups, MAX_SEGMENTS)


def _segments_column(
    count: np.ndarray,
    cuts: np.ndarray,
    alpha: np.ndarray,
    slope: np.ndarray,
    ex: np.ndarray,
    start: np.ndarray,
    m: np.ndarray,
    gpu: np.ndarray,
) -> pa.Array[Any]:
    """The ``segments`` list per series (null without a curve), built from flat
    arrays: one entry per (series, segment)."""
    group = np.repeat(np.arange(len(count)), count)
    offsets = np.concatenate([[0], np.cumsum(count)])
    j = np.arange(len(group)) - offsets[:-1][group]
    k = count[group]
    # Distinct-size index where each segment starts and where the next one does.
    edges = np.concatenate([np.zeros((len(count), 1), np.int64), cuts], axis=1)
    edges = np.concatenate([edges, m[:, None]], axis=1)
    first = edges[group, j]
    after = np.where(
        j + 1 < k, edges[group, np.minimum(j + 1, MAX_SEGMENTS - 1)], m[group]
    )
    second = np.where(
        k > 1, ex[start[group] + edges[group, 1].clip(max=m[group] - 1)], np.inf
    )
    names = np.empty(len(group), dtype=object)
    for size in (1, 2, 3):
        for flag in (False, True):
            for low in (False, True):
                which = (k == size) & (gpu[group] == flag) & ((second < LL_END) == low)
                if which.any():
                    called = protocol_names(size, 0.0 if low else np.inf, flag)
                    names[which] = np.array(called, dtype=object)[j[which]]
    struct = pa.StructArray.from_arrays(
        [
            pa.array(names.tolist(), type=pa.string()),
            pa.array(ex[start[group] + first].astype(np.int64), type=pa.int64()),
            pa.array(ex[start[group] + after - 1].astype(np.int64), type=pa.int64()),
            pa.array(alpha[group, j], type=pa.float64()),
            pa.array(1e-3 / slope[group, j], type=pa.float64()),
        ],
        fields=list(SEGMENT_TYPE.value_type),
    )
    mask = pa.array(count == 0)
    return pa.ListArray.from_arrays(
        pa.array(offsets.astype(np.int32), type=pa.int32()), struct, mask=mask
    )
