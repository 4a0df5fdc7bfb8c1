"""Bus bandwidth recomputed from size and time, and AIBooster's ideal to judge it by.

The first half of the efficiency engine (:mod:`ncclparse.efficiency` re-exports the
public names): nccl-tests' busbw factors, algbw/busbw recomputed per row with flags for
printed figures that disagree, and the ideal bus bandwidth of P GPUs per node on Q
nodes. Pure and vectorized, as the engine is.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import _arrow as arr
from ncclparse.collectives import COLLECTIVES, TABLE, BusbwKind
from ncclparse.efficiency import notes as why
from ncclparse.errors import ProfileError


def busbw_factor(collective: str, nranks: int) -> float:
    """Return nccl-tests' busbw/algbw factor for one collective on n ranks.

    all_reduce 2(n-1)/n; all_gather(_v), reduce_scatter, alltoall(v), gather, scatter
    (n-1)/n; broadcast, reduce, sendrecv, hypercube 1 (nccl-tests-format.md sec. 7).
    Raises ProfileError for an unknown collective or n < 1.
    """
    entry = TABLE.get(collective)
    if entry is None or nranks < 1:
        raise ProfileError(f"no busbw factor for {collective!r} on {nranks} ranks")
    return float(_factor(np.array([entry.busbw]), np.array([float(nranks)]))[0])


def bandwidth_columns(measurements: pa.Table) -> pa.Table:
    """Return ``measurements`` plus busbw_factor, algbw/busbw_calc_gbps and two flags.

    ``busbw_mismatch``: the printed busbw differs from the recomputed one by more than
    the rounding of the printed busbw and time can explain. ``algbw_prescaled``: an
    all_gather/reduce_scatter whose printed algbw is size (n-1)/n / t, as nccl-tests
    printed it before v2.9.0. Both null where the printed value is missing.
    """
    cols = InputColumns(measurements)
    bw = bandwidths(cols)
    out = measurements
    for name in ("busbw_factor", "algbw_calc_gbps", "busbw_calc_gbps"):
        out = out.append_column(name, arr.floats(bw[name]))
    for name in ("busbw_mismatch", "algbw_prescaled"):
        out = out.append_column(name, arr.bools(bw[name]))
    return out


# BusbwKind per 1-based collective code (0: unknown collective).
_KINDS = np.array([0, *(TABLE[c].busbw for c in COLLECTIVES)])


class InputColumns:
    """The input columns the engine needs, as numpy arrays (NaN for null)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.size = arr.num(table, "size_bytes")
        self.time = arr.num(table, "time_us")
        self.nranks = arr.num(table, "nranks")
        self.nnodes = arr.num(table, "nnodes")
        self.algbw = arr.num(table, "algbw_gbps")
        self.busbw = arr.num(table, "busbw_gbps")
        self.grouped = arr.flag(table, "grouped")
        self.cputime = arr.flag(table, "cputime")
        self.legacy = arr.strings(table, "wrong_kind") == "max_deviation"
        # 1-based index into COLLECTIVES (0: null or unknown), and its busbw kind.
        self.code = arr.codes(table, "collective", COLLECTIVES)
        self.kind = _KINDS[self.code]
        self.device = table.column("device")
        self.named = pc.is_valid(table.column("collective")).to_numpy(
            zero_copy_only=False
        )


def bandwidths(c: InputColumns) -> dict[str, np.ndarray]:
    """Per row: busbw factor, algbw/busbw recomputed, the two flags, kind, reasons."""
    n, t, kind = c.nranks, c.time, c.kind
    reasons = np.where(c.grouped, why.GROUPED, 0) | np.where(c.cputime, why.CPUTIME, 0)
    reasons |= np.where(kind == 0, why.NO_COLL, 0) | np.where(np.isnan(n), why.NO_N, 0)
    reasons |= np.where(~(t > 0), why.BAD_T, 0)
    ok = (kind > 0) & ~np.isnan(n) & (n >= 1) & (t > 0) & ~c.grouped
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes/us = 1e6 B/s = 1e-3 GB/s; hypercube moves size (n-1)/n (sec. 7).
        alg = (
            np.where(kind == BusbwKind.HYPERCUBE, (n - 1) / n, 1.0) * c.size / t * 1e-3
        )
        factor = _factor(kind, n)
        bus = alg * factor
        time_tol = _time_tolerance(t, c.legacy)
        slack = np.abs(bus) * time_tol / (t - time_tol)
        limit = _print_tolerance(c.busbw) + slack + 1e-9 * np.abs(bus)
        mismatch = np.abs(c.busbw - bus) > limit
        a_limit = _print_tolerance(c.algbw) + np.abs(alg) * time_tol / (t - time_tol)
        modern = np.abs(c.algbw - alg) <= a_limit
        old = np.abs(c.algbw - alg * (n - 1) / n) <= a_limit
    judged = ok & (t > time_tol)
    alg, bus, factor = (np.where(ok, v, np.nan) for v in (alg, bus, factor))
    prescaled = (kind == BusbwKind.GATHER_ALL) & (n > 1) & old & ~modern
    return {
        "kind": np.where(ok, kind, 0),
        "busbw_factor": factor,
        "algbw_calc_gbps": alg,
        "busbw_calc_gbps": bus,
        "busbw_mismatch": arr.masked(mismatch, judged & ~np.isnan(c.busbw)),
        "algbw_prescaled": arr.masked(prescaled, judged & ~np.isnan(c.algbw)),
        "reasons": reasons,
    }


def _factor(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        part = (n - 1) / n
    return np.select(
        [
            kind == BusbwKind.REDUCE_ALL,
            kind == BusbwKind.GATHER_ALL,
            kind >= BusbwKind.ONE,
        ],
        [2 * part, part, 1.0],
        np.nan,
    )


def _print_tolerance(value: np.ndarray) -> np.ndarray:
    """Half a unit in the last printed place of a bandwidth (sec. 6.1: %6.2f, then E7's
    width fitting to 1 or 0 decimals and %6.0e), taking the loosest era."""
    a = np.abs(np.nan_to_num(value))
    with np.errstate(divide="ignore"):
        exp = 0.5 * 10.0 ** np.floor(np.log10(np.maximum(a, 1.0)))
    return np.select([a < 1e3, a < 1e4, a < 1e6], [0.005, 0.05, 0.5], exp)


def _time_tolerance(t: np.ndarray, legacy: np.ndarray) -> np.ndarray:
    """Half a unit of the printed time: %.2f to 100 us, %.1f to 1e4, %.0f, then %7.1e;
    E0-E2 logs (max-deviation column) may have printed ms with 3 decimals."""
    a = np.abs(np.nan_to_num(t))
    with np.errstate(divide="ignore"):
        exp = 0.05 * 10.0 ** np.floor(np.log10(np.maximum(a, 1.0)))
    tol = np.select([a <= 100, a <= 1e4, a < 1e7], [0.005, 0.05, 0.5], exp)
    return np.where(legacy, np.maximum(tol, 0.5), tol)
