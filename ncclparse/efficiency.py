"""The efficiency engine: recomputed bandwidths, ideal bandwidth, alpha-beta fits, gaps.

Pure and vectorized: a ``measurements`` table goes in, the same table with added columns
and a per-series fits table come out (:func:`analyze`). No I/O, no per-row Python. The
arithmetic is written up in ``docs/efficiency.md``; every null it leaves has its reason
in the ``efficiency_note`` column.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from .errors import ProfileError
from .hardware import HardwareProfile, resolve_profile
from .units import bandwidth_gbps

__all__ = [
    "FIT_CLASSES",
    "FIT_COLUMNS",
    "ROW_COLUMNS",
    "SERIES_KEYS",
    "Analysis",
    "IdealBandwidth",
    "analyze",
    "bandwidth_columns",
    "busbw_factor",
    "ideal_bandwidth",
    "ideal_busbw",
]

# Busbw factor kinds (nccl-tests-format.md sec. 7; seed 000 "Bus Bandwidth").
_KIND = {
    "all_reduce": 1,  # 2(n-1)/n
    "all_gather": 2,  # (n-1)/n
    "all_gather_v": 2,
    "reduce_scatter": 2,
    "alltoall": 2,
    "alltoallv": 2,
    "gather": 2,
    "scatter": 2,
    "broadcast": 3,  # 1
    "reduce": 3,
    "sendrecv": 3,
    "hypercube": 4,  # factor 1, but algbw = size (n-1)/n / t
}

ROW_COLUMNS = (
    "busbw_factor",
    "algbw_calc_gbps",
    "busbw_calc_gbps",
    "busbw_mismatch",
    "algbw_prescaled",
    "ideal_busbw_gbps",
    "ideal_bound",
    "efficiency",
    "ideal_time_us",
    "model_time_us",
    "model_error_pct",
    "regime",
    "fit_class",
    "gap_us",
    "gap_hw_latency_us",
    "gap_latency_us",
    "gap_bandwidth_us",
    "gap_staging_us",
    "gap_residual_us",
    "efficiency_note",
)

_NOTES = (
    "grouped: the time covers several collectives, no per-collective figures",
    "cputime: the time is CPU launch time (-C 1), no efficiency, fit or gap",
    "collective unknown or without an nccl-tests busbw factor",
    "nranks unknown",
    "time is not positive",
    "no hardware profile: pass --profile or --intra-bw/--inter-bw",
    "multi-node but the inter-node bandwidth I is unknown",
    "node count unknown: pass --nodes or --gpus-per-node",
    "ranks not divisible by nodes: seed 003 assumes equal ranks per node",
    "single rank: no data moves",
    "series has fewer than 2 distinct non-zero sizes: no alpha-beta fit",
    "0-byte row: not used by the fit",
    "hardware latency unknown: gap_latency_us includes it",
    "seed 004 gives host staging for all-reduce only: it stays in gap_bandwidth_us",
    "busbw above the seed 003 ideal (in-network reduction, or a profile too low)",
    "time does not grow with size in this series: beta unbounded, all time is latency",
)
(
    _GROUPED,
    _CPUTIME,
    _NO_COLL,
    _NO_N,
    _BAD_T,
    _NO_PROFILE,
    _NO_I,
    _NO_Q,
    _UNEVEN,
    _ONE_RANK,
    _NO_FIT,
    _ZERO,
    _NO_ALPHA,
    _STAGING,
    _ABOVE,
    _FLAT,
) = (1 << i for i in range(len(_NOTES)))


@dataclass(frozen=True, slots=True)
class IdealBandwidth:
    """Seed 003's ideal bus bandwidth (GB/s) and its two multi-node terms.

    ``inter_term_gbps`` is None on one node; ``intra_term_gbps`` is None when unbounded
    (one GPU per node). ``bound`` names the term that sets the ideal.
    """

    ideal_busbw_gbps: float
    intra_term_gbps: float | None
    inter_term_gbps: float | None
    bound: str
    ranks: int
    nodes: int

    def as_dict(self) -> dict[str, float | int | str | None]:
        return {
            "ideal_busbw_gbps": self.ideal_busbw_gbps,
            "intra_term_gbps": self.intra_term_gbps,
            "inter_term_gbps": self.inter_term_gbps,
            "bound": self.bound,
            "ranks": self.ranks,
            "nodes": self.nodes,
        }


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`analyze` returns: rows (input + ROW_COLUMNS), fits, assumptions."""

    rows: pa.Table
    fits: pa.Table
    assumptions: tuple[str, ...]


def busbw_factor(collective: str, nranks: int) -> float:
    """Return nccl-tests' busbw/algbw factor for one collective on n ranks.

    all_reduce 2(n-1)/n; all_gather(_v), reduce_scatter, alltoall(v), gather, scatter
    (n-1)/n; broadcast, reduce, sendrecv, hypercube 1 (nccl-tests-format.md sec. 7).
    Raises ProfileError for an unknown collective or n < 1.
    """
    kind = _KIND.get(collective)
    if kind is None or nranks < 1:
        raise ProfileError(f"no busbw factor for {collective!r} on {nranks} ranks")
    return float(_factor(np.array([kind]), np.array([float(nranks)]))[0])


def ideal_busbw(
    intra_gbps: np.ndarray | float,
    inter_gbps: np.ndarray | float,
    ranks: np.ndarray | float,
    nodes: np.ndarray | float,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Vectorized seed 003 ideal: ``(ideal, intra_term, inter_term)`` in GB/s.

    Parameters
    ----------
    intra_gbps : B, per-GPU unidirectional intra-node bandwidth.
    inter_gbps : I, per-node unidirectional inter-node bandwidth (NaN if unknown).
    ranks, nodes : N and Q (N divisible by Q is the caller's check).

    One node: ideal = B, inter term NaN. Several: ``min(I(N-1)Q/(N(Q-1)),
    B(N-1)/(N-Q))``;
    with P = N/Q = 1 the intra term is unbounded (inf). NaN inputs give NaN.
    """
    b, i, n, q = (
        np.asarray(v, dtype=np.float64) for v in (intra_gbps, inter_gbps, ranks, nodes)
    )
    with np.errstate(divide="ignore", invalid="ignore"):
        inter = np.where(q > 1, i * (n - 1) * q / (n * (q - 1)), np.nan)
        intra = np.where(q > 1, np.where(n > q, b * (n - 1) / (n - q), np.inf), b)
        ideal = np.where(q > 1, np.fmin(inter, intra), b)
    ideal = np.where(((q > 1) & np.isnan(i)) | np.isnan(q) | np.isnan(n), np.nan, ideal)
    return ideal, intra, inter


def ideal_bandwidth(
    intra_bw: float | str,
    inter_bw: float | str | None = None,
    *,
    gpus_per_node: int,
    nodes: int = 1,
) -> IdealBandwidth:
    """Seed 003's ideal bus bandwidth for P GPUs per node on Q nodes (N = P Q).

    Bandwidths in GB/s or with units (``"450GB/s"``). Example (seed 003): B = 450,
    I = 100, P = 8, Q = 2 gives min(187.5, 482.1) = 187.5 GB/s. Raises ProfileError
    when Q > 1 and I is missing, or P, Q < 1.
    """
    if gpus_per_node < 1 or nodes < 1:
        raise ProfileError("gpus per node and nodes must be >= 1")
    if nodes > 1 and inter_bw is None:
        raise ProfileError(
            f"{nodes} nodes need the inter-node bandwidth: pass --inter-bw"
        )
    b = bandwidth_gbps(intra_bw)
    i = bandwidth_gbps(inter_bw) if inter_bw is not None else math.nan
    n = gpus_per_node * nodes
    ideal, intra, inter = (float(a) for a in ideal_busbw(b, i, n, nodes))
    bound = "intra" if nodes == 1 or intra <= inter else "inter"
    return IdealBandwidth(
        ideal,
        None if math.isinf(intra) else intra,
        None if math.isnan(inter) else inter,
        bound,
        n,
        nodes,
    )


def bandwidth_columns(measurements: pa.Table) -> pa.Table:
    """Return ``measurements`` plus busbw_factor, algbw/busbw_calc_gbps and two flags.

    ``busbw_mismatch``: the printed busbw differs from the recomputed one by more than
    the rounding of the printed busbw and time can explain. ``algbw_prescaled``: an
    all_gather/reduce_scatter whose printed algbw is size (n-1)/n / t, as nccl-tests
    printed it before v2.9.0. Both null where the printed value is missing.
    """
    cols = _Columns(measurements)
    bw = _bandwidths(cols)
    out = measurements
    for name in ("busbw_factor", "algbw_calc_gbps", "busbw_calc_gbps"):
        out = out.append_column(name, _floats(bw[name]))
    for name in ("busbw_mismatch", "algbw_prescaled"):
        out = out.append_column(name, _bools(bw[name]))
    return out


def analyze(
    measurements: pa.Table,
    profile: HardwareProfile | str | Path | None = None,
    *,
    intra_bw: float | str | None = None,
    inter_bw: float | str | None = None,
    gpus_per_node: int | None = None,
    nodes: int | None = None,
) -> Analysis:
    """Compute every efficiency column for a ``measurements`` table, plus series fits.

    ``profile`` is a profile, a preset name or a TOML path; without one, each row's
    ``device`` picks a matching preset (reported in ``assumptions``). ``intra_bw``,
    ``inter_bw``, ``gpus_per_node`` override B, I, P; ``nodes`` sets Q for every row
    (default: the table's ``nnodes``). Raises ProfileError for a bad profile or when
    ``nodes``/``gpus_per_node`` do not divide a row's rank count.
    """
    cols = _Columns(measurements)
    notes: list[str] = []
    bw = _bandwidths(cols)
    reasons = bw["reasons"]
    hw = _row_hardware(cols, profile, intra_bw, inter_bw, gpus_per_node, notes)
    n, f = cols.nranks, bw["busbw_factor"]
    q, q_reasons = _nodes(cols, hw, nodes, gpus_per_node, notes)
    reasons |= np.where(np.isnan(hw["intra"]), _NO_PROFILE, 0) | q_reasons
    ideal, intra, inter = ideal_busbw(hw["intra"], hw["inter"], n, q)
    reasons |= np.where(
        (q > 1) & np.isnan(hw["inter"]) & ~np.isnan(hw["intra"]), _NO_I, 0
    )
    reasons |= np.where(n == 1, _ONE_RANK, 0)
    usable = (
        reasons & (_GROUPED | _CPUTIME | _NO_COLL | _NO_N | _BAD_T | _ONE_RANK)
    ) == 0
    ideal = np.where(usable, ideal, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = bw["busbw_calc_gbps"] / ideal
        ideal_time = bw["busbw_calc_gbps"] * cols.time / ideal
    reasons |= np.where(eff > 1, _ABOVE, 0)
    bound = np.where(np.isnan(ideal), -1, np.where((q > 1) & (inter <= intra), 1, 0))

    # The fit needs no busbw factor: IMB pingpong and the like get one too.
    fit_ok = ((reasons & (_GROUPED | _CPUTIME | _BAD_T)) == 0) & cols.named
    fit = _fit_series(cols.table, fit_ok, cols.size, cols.time)
    reasons |= fit.reasons

    steps = _latency_steps(bw["kind"], n)
    hw_lat = steps * hw["alpha"]
    reasons |= np.where(
        np.isnan(hw_lat) & ~np.isnan(fit.alpha) & ~np.isnan(ideal), _NO_ALPHA, 0
    )
    staging, st_reasons = _staging(bw["kind"], cols.size, n, q, hw)
    reasons |= np.where(~np.isnan(ideal) & ~np.isnan(fit.alpha), st_reasons, 0)
    gap = np.where(np.isnan(ideal), np.nan, cols.time - ideal_time)
    known = ~np.isnan(gap) & ~np.isnan(fit.alpha)
    gap_lat = np.where(known, fit.alpha - np.nan_to_num(hw_lat), np.nan)
    gap_bw = np.where(
        known, fit.bandwidth_us - ideal_time - np.nan_to_num(staging), np.nan
    )
    gap_res = np.where(known, gap - np.nan_to_num(hw_lat) - gap_lat - gap_bw, np.nan)
    gap_res -= np.where(known, np.nan_to_num(staging), 0.0)

    out = measurements
    values = {
        "busbw_factor": _floats(f),
        "algbw_calc_gbps": _floats(bw["algbw_calc_gbps"]),
        "busbw_calc_gbps": _floats(bw["busbw_calc_gbps"]),
        "busbw_mismatch": _bools(bw["busbw_mismatch"]),
        "algbw_prescaled": _bools(bw["algbw_prescaled"]),
        "ideal_busbw_gbps": _floats(ideal),
        "ideal_bound": _labels(bound, ("intra", "inter")),
        "efficiency": _floats(eff),
        "ideal_time_us": _floats(ideal_time),
        "model_time_us": _floats(fit.model_time),
        "model_error_pct": _floats(fit.error_pct),
        "regime": _labels(fit.regime, ("latency-bound", "bandwidth-bound")),
        "fit_class": _labels(fit.fit_class, FIT_CLASSES),
        "gap_us": _floats(gap),
        "gap_hw_latency_us": _floats(np.where(known, hw_lat, np.nan)),
        "gap_latency_us": _floats(gap_lat),
        "gap_bandwidth_us": _floats(gap_bw),
        "gap_staging_us": _floats(np.where(known, staging, np.nan)),
        "gap_residual_us": _floats(gap_res),
        "efficiency_note": _note_strings(reasons),
    }
    for name in ROW_COLUMNS:
        out = out.append_column(name, values[name])
    return Analysis(out, fit.table, tuple(dict.fromkeys(notes)))


class _Columns:
    """The input columns the engine needs, as numpy arrays (NaN for null)."""

    def __init__(self, table: pa.Table) -> None:
        self.table = table
        self.size = _num(table, "size_bytes")
        self.time = _num(table, "time_us")
        self.nranks = _num(table, "nranks")
        self.nnodes = _num(table, "nnodes")
        self.algbw = _num(table, "algbw_gbps")
        self.busbw = _num(table, "busbw_gbps")
        self.grouped = _flag(table, "grouped")
        self.cputime = _flag(table, "cputime")
        self.legacy = _str(table, "wrong_kind") == "max_deviation"
        self.kind = np.array([0, *_KIND.values()])[
            _codes(table, "collective", tuple(_KIND))
        ]
        self.device = table.column("device")
        self.named = pc.is_valid(table.column("collective")).to_numpy(
            zero_copy_only=False
        )


def _bandwidths(c: _Columns) -> dict[str, np.ndarray]:
    n, t, kind = c.nranks, c.time, c.kind
    reasons = np.where(c.grouped, _GROUPED, 0) | np.where(c.cputime, _CPUTIME, 0)
    reasons |= np.where(kind == 0, _NO_COLL, 0) | np.where(np.isnan(n), _NO_N, 0)
    reasons |= np.where(~(t > 0), _BAD_T, 0)
    ok = (kind > 0) & ~np.isnan(n) & (n >= 1) & (t > 0) & ~c.grouped
    with np.errstate(divide="ignore", invalid="ignore"):
        # bytes/us = 1e6 B/s = 1e-3 GB/s; hypercube moves size (n-1)/n (sec. 7).
        alg = np.where(kind == 4, (n - 1) / n, 1.0) * c.size / t * 1e-3
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
    prescaled = (kind == 2) & (n > 1) & old & ~modern
    return {
        "kind": np.where(ok, kind, 0),
        "busbw_factor": factor,
        "algbw_calc_gbps": alg,
        "busbw_calc_gbps": bus,
        "busbw_mismatch": _masked(mismatch, judged & ~np.isnan(c.busbw)),
        "algbw_prescaled": _masked(prescaled, judged & ~np.isnan(c.algbw)),
        "reasons": reasons,
    }


def _factor(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    with np.errstate(divide="ignore", invalid="ignore"):
        part = (n - 1) / n
    return np.select([kind == 1, kind == 2, kind >= 3], [2 * part, part, 1.0], np.nan)


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


def _row_hardware(
    c: _Columns,
    profile: HardwareProfile | str | Path | None,
    intra_bw: float | str | None,
    inter_bw: float | str | None,
    gpus_per_node: int | None,
    notes: list[str],
) -> dict[str, np.ndarray]:
    """Per-row B, I, P, alpha and staging figures from one profile or per device."""
    index, _ = _dictionary_codes(c.device)
    names = [None, *pc.unique(c.device.drop_null()).to_pylist()]
    profiles: list[HardwareProfile | None] = []
    if profile is not None:
        chosen, found = resolve_profile(
            profile, intra_bw=intra_bw, inter_bw=inter_bw, gpus_per_node=gpus_per_node
        )
        profiles, notes[:0] = [chosen] * len(names), found
    else:
        for name in names:
            chosen, found = resolve_profile(
                None,
                intra_bw=intra_bw,
                inter_bw=inter_bw,
                gpus_per_node=gpus_per_node,
                device_name=name,
            )
            profiles.append(chosen)
            notes.extend(found)

    def pick(attr: str, default: float = np.nan) -> np.ndarray:
        values = [
            default
            if p is None or getattr(p, attr) is None
            else float(getattr(p, attr))
            for p in profiles
        ]
        return np.array(values, dtype=np.float64)[index]

    hosts = pick("hosts_per_node")
    return {
        "intra": pick("intra_gbps"),
        "inter": pick("inter_gbps"),
        "gpus": pick("gpus_per_node"),
        "hosts": hosts,
        "alpha": pick("alpha_us"),
        "pcie": pick("pcie_gbps"),
        "staged": pick("host_staging", 0.0) > 0,
    }


def _nodes(
    c: _Columns,
    hw: dict[str, np.ndarray],
    nodes: int | None,
    gpus_per_node: int | None,
    notes: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """Q per row: --nodes, else N/--gpus-per-node, else the log's hosts, else
    inferred."""
    n = c.nranks
    if nodes is not None or gpus_per_node is not None:
        q = np.full(n.shape, float(nodes)) if nodes is not None else n / gpus_per_node
        bad = ~np.isnan(n) & ((n % q != 0) | (q < 1) | (q > n))
        if bad.any():
            given = (
                f"--nodes {nodes}"
                if nodes is not None
                else f"--gpus-per-node {gpus_per_node}"
            )
            counts = ", ".join(str(int(v)) for v in np.unique(n[bad]))
            raise ProfileError(
                f"{given} does not divide the rank count ({counts}): "
                f"every node must hold the same number of ranks (seed 003)"
            )
        return q, np.zeros(n.shape, dtype=np.int64)
    with np.errstate(invalid="ignore"):
        from_hosts = np.ceil(c.nnodes / hw["hosts"])
    inferred = np.where(n <= hw["gpus"], 1.0, n / hw["gpus"])
    inferred = np.where(inferred % 1 == 0, inferred, np.nan)
    q = np.where(np.isnan(from_hosts), inferred, from_hosts)
    if (np.isnan(c.nnodes) & ~np.isnan(inferred) & ~np.isnan(n)).any():
        notes.append(
            "node count not in the log: assumed full nodes of the profile's GPUs per "
            "node (one node when N <= P); pass --nodes to set it"
        )
    if (hw["hosts"] > 1).any() and not np.isnan(c.nnodes).all():
        notes.append(
            "hosts grouped into NVLink domains of the profile to count nodes (Q)"
        )
    reasons = np.where(np.isnan(q) & ~np.isnan(hw["intra"]), _NO_Q, 0)
    with np.errstate(invalid="ignore"):
        uneven = ~np.isnan(q) & ((n % q != 0) | (q > n))
    reasons |= np.where(uneven, _UNEVEN, 0)
    return np.where(uneven, np.nan, q), reasons


def _latency_steps(kind: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Fewest alpha steps of any seed 000 algorithm (costmodels.latency_steps)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.ceil(np.log2(np.maximum(n, 1)))
    ring = n - 1
    return np.select([kind == 1, kind == 2, kind == 3], [2 * log, ring, log], np.nan)


def _staging(
    kind: np.ndarray,
    size: np.ndarray,
    n: np.ndarray,
    q: np.ndarray,
    hw: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Seed 004 Eq. 6 host staging, 2*2*Z/(P*B_PCIe), on multi-node all-reduce."""
    staged = hw["staged"] & (q > 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 4 * size / ((n / q) * hw["pcie"] * 1e3)
    value = np.where(staged, np.where(kind == 1, term, np.nan), 0.0)
    return value, np.where(staged & (kind != 1), _STAGING, 0)


def _num(table: pa.Table, name: str) -> np.ndarray:
    column = table.column(name).cast(pa.float64())
    return pc.fill_null(column, np.nan).to_numpy()


def _flag(table: pa.Table, name: str) -> np.ndarray:
    return pc.fill_null(table.column(name), False).to_numpy().astype(bool)


def _str(table: pa.Table, name: str) -> np.ndarray:
    return np.asarray(
        pc.fill_null(table.column(name), "").to_numpy(zero_copy_only=False)
    )


def _codes(table: pa.Table, name: str, vocabulary: tuple[str, ...]) -> np.ndarray:
    """1-based index of each value in ``vocabulary``, 0 for null or unknown."""
    found = pc.index_in(table.column(name), value_set=pa.array(vocabulary))
    return pc.fill_null(found, -1).to_numpy().astype(np.int64) + 1


def _masked(values: np.ndarray, valid: np.ndarray) -> np.ndarray:
    return np.where(valid, values.astype(np.float64), np.nan)


def _floats(values: np.ndarray) -> pa.Array:
    values = np.asarray(values, dtype=np.float64)
    return pa.array(values, mask=~np.isfinite(values), type=pa.float64())


def _bools(values: np.ndarray) -> pa.Array:
    return pa.array(values > 0, mask=np.isnan(values), type=pa.bool_())


def _labels(codes: np.ndarray, labels: tuple[str, ...]) -> pa.Array:
    indices = pa.array(np.asarray(codes, dtype=np.int64), mask=np.asarray(codes) < 0)
    return pa.array(labels, type=pa.string()).take(indices)


def _note_strings(reasons: np.ndarray) -> pa.Array:
    unique, inverse = np.unique(reasons, return_inverse=True)
    texts = [
        "; ".join(t for bit, t in enumerate(_NOTES) if int(u) >> bit & 1) or None
        for u in unique
    ]
    return pa.array(texts, type=pa.string()).take(pa.array(inverse.astype(np.int64)))


# --- alpha-beta fits per series (seeds 000, 001, 002) ---------------------------------

SERIES_KEYS = (
    "source",
    "run",
    "collective",
    "dtype",
    "redop",
    "root",
    "placement",
    "nranks",
)
FIT_CLASSES = (
    "excellent",
    "useful",
    "assumptions violated",
)  # seed 000 "Acceptable Error"
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
class _Fit:
    alpha: np.ndarray  # per row, µs
    bandwidth_us: np.ndarray  # per row, size / beta
    model_time: np.ndarray
    error_pct: np.ndarray
    regime: np.ndarray  # 0 latency-bound, 1 bandwidth-bound, -1 none
    fit_class: np.ndarray
    reasons: np.ndarray
    table: pa.Table


def _fit_series(
    table: pa.Table, eligible: np.ndarray, x: np.ndarray, y: np.ndarray
) -> _Fit:
    """Fit T(n) = alpha + n/beta per series by Huber-reweighted relative least squares.

    Weights 1/T^2 make the fit minimise relative error, so small messages count (seed
    000 "Validation": error = |T_pred - T_actual| / T_actual). Huber weights on the
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
    reasons[rows] |= np.where(valid, 0, _NO_FIT)[gid[rows]]
    reasons[rows] |= np.where(flat & valid, _FLAT, 0)[gid[rows]]
    reasons |= np.where(rows & (x == 0), _ZERO, 0)

    with np.errstate(divide="ignore", invalid="ignore"):
        beta = np.where(b > 0, 1e-3 / b, np.nan)
    g_notes = np.where(valid, 0, _NO_FIT) | np.where(valid & flat, _FLAT, 0)
    keys = table.take(pa.array(first, type=pa.int64())).select(list(SERIES_KEYS))
    extra = {
        "points": pa.array(points, type=pa.int64()),
        "alpha_us": _floats(a),
        "beta_gbps": _floats(beta),
        "crossover_bytes": _floats(a * beta * 1e3),
        "median_error_pct": _floats(np.where(valid, median, np.nan)),
        "max_error_pct": _floats(np.where(valid, worst, np.nan)),
        "fit_class": _labels(g_class, FIT_CLASSES),
        "fit_note": _note_strings(g_notes),
    }
    for name, column in extra.items():
        keys = keys.append_column(name, column)
    return _Fit(alpha, bandwidth_us, model, error, regime, row_class, reasons, keys)


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
        codes, cardinality = _dictionary_codes(table.column(name))
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


def _dictionary_codes(column: pa.ChunkedArray) -> tuple[np.ndarray, int]:
    """Codes 1.. of each distinct value in first-seen order (0 for null), and their
    count."""
    array = column.combine_chunks() if column.num_chunks else pa.array([], column.type)
    encoded = pc.dictionary_encode(array)
    codes = pc.fill_null(encoded.indices, -1).to_numpy(zero_copy_only=False) + 1
    return codes.astype(np.int64), len(encoded.dictionary) + 1
