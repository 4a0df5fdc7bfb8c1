"""The efficiency engine: recomputed bandwidths, ideal bandwidth, alpha-beta fits, gaps.

Pure and vectorized: a ``measurements`` table goes in, the same table with added columns
and a per-series fits table come out (:func:`analyze`). No I/O, no per-row Python. The
arithmetic is written up in ``docs/efficiency.md``; every null it leaves has its reason
in the ``efficiency_note`` column.

This module assembles the rows: the hardware figures and node count of each row, the
efficiency, and the attribution of the gap to the ideal. The bandwidth recomputation
is in :mod:`~ncclparse.efficiency.bandwidth`, the ideal in
:mod:`~ncclparse.efficiency.ideal`, the fits in :mod:`~ncclparse.efficiency.fits`.
"""

from __future__ import annotations

import dataclasses
import html
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from ncclparse import _arrow as arr
from ncclparse.collectives import COLLECTIVES, TABLE, Bound, BusbwKind, Steps
from ncclparse.efficiency import achievable
from ncclparse.efficiency import algorithms as algo
from ncclparse.efficiency import notes as why
from ncclparse.efficiency.bandwidth import InputColumns, bandwidths
from ncclparse.efficiency.fits import FIT_CLASSES, Fit, fit_series
from ncclparse.efficiency.hardware import (
    HardwareOptions,
    HardwareProfile,
    another_gpu,
)
from ncclparse.efficiency.ideal import ideal_by_collective
from ncclparse.errors import ProfileError

__all__ = ["ANALYSED_COLUMNS", "Analysis", "analyze"]

ANALYSED_COLUMNS = (
    "busbw_factor",
    "algbw_calc_gbps",
    "busbw_calc_gbps",
    "busbw_mismatch",
    "algbw_prescaled",
    "ideal_busbw_gbps",
    "ideal_bound",
    "ideal_basis",
    "algorithm",
    "algorithm_basis",
    "expected_busbw_gbps",
    "ideal_low_busbw_gbps",
    "algorithm_low",
    "expected_low_busbw_gbps",
    "efficiency",
    "ideal_time_us",
    "model_time_us",
    "model_error_pct",
    "regime",
    "plateau",
    "fit_class",
    "gap_us",
    "gap_hw_latency_us",
    "gap_latency_us",
    "gap_bandwidth_us",
    "gap_staging_us",
    "gap_residual_us",
    "efficiency_note",
)

# Steps and bounds per 1-based collective code (0: unknown or no model).
_STEPS = np.array([0, *(TABLE[c].steps or 0 for c in COLLECTIVES)])
_BOUNDS = np.array([0, *(TABLE[c].bound for c in COLLECTIVES)])
_ALL_REDUCE = COLLECTIVES.index("all_reduce") + 1
# Where a row's ideal comes from: figures the user gave (a profile, --intra-bw ...),
# a preset matched by GPU name on one node (B is the GPU's own), or on several nodes
# (NIC count and speed assumed: not judged).
BASES = ("given", "device", "assumed", "nics read")
# The slowest NIC a GPU cluster's RDMA fabric plausibly has: 100 Gb/s (EDR
# InfiniBand, 100 GbE RoCE, an EFA card; sjeaugey, NVIDIA/nccl-tests #119: 12 GB/s
# per 100 Gb/s NIC). Where a log states the NICs NCCL uses but not their speed, the
# lenient reading takes it (docs/efficiency.md section 2).
SLOWEST_NIC_GBPS = 12.5


@dataclass(frozen=True, slots=True)
class Analysis:
    """What :func:`analyze` returns: rows (input + ANALYSED_COLUMNS), fits, assumptions
    and the distinct hardware profiles the rows were judged against."""

    rows: pa.Table
    fits: pa.Table
    assumptions: tuple[str, ...]
    profiles: tuple[HardwareProfile, ...] = ()

    def __repr__(self) -> str:
        """One line: ``<Analysis: 62 rows, 2 fits, profile h100, 1 assumption>``
        (the tables themselves are attributes)."""
        return f"<Analysis: {self._summary()}>"

    def _repr_html_(self) -> str:
        """The summary and the assumptions, escaped: for notebooks."""
        said = "".join(f"<li>{html.escape(a)}</li>" for a in self.assumptions)
        return (
            f"<div><p>Analysis: {html.escape(self._summary())}</p>"
            + (f"<p>Assumptions:</p><ul>{said}</ul>" if said else "")
            + "</div>"
        )

    def _summary(self) -> str:
        def count(n: int, noun: str) -> str:
            return f"{n} {noun}{'s' * (n != 1)}"

        parts = [count(self.rows.num_rows, "row"), count(self.fits.num_rows, "fit")]
        names = ", ".join(p.name for p in self.profiles)
        parts.append(f"profile{'s' * (len(self.profiles) > 1)} {names or 'none'}")
        parts.append(count(len(self.assumptions), "assumption"))
        return ", ".join(parts)


def analyze(
    measurements: pa.Table,
    hardware: HardwareOptions | HardwareProfile | str | Path | None = None,
    runs: pa.Table | None = None,
) -> Analysis:
    """Compute every efficiency column for a ``measurements`` table, plus series fits.

    ``hardware`` is :class:`HardwareOptions`, or just a profile, preset name or TOML
    path; without a profile, each row's ``device`` picks a matching preset (reported
    in ``assumptions``). ``runs`` (the ``runs`` table of the same parse) adds what
    the logs say of the topology: the NICs NCCL uses, GPUs per node, GPUDirect RDMA.
    Raises ProfileError for a bad profile or when ``nodes``/``gpus_per_node`` do not
    divide a row's rank count.
    """
    options = HardwareOptions.of(hardware)
    cols = InputColumns(measurements)
    notes: list[str] = []
    bw = bandwidths(cols)
    reasons = bw["reasons"]
    hw, profiles = _row_hardware(cols, options, notes)
    at, listed = _runs_of(measurements, runs)
    log = _run_topology(at, listed)
    n, f = cols.nranks, bw["busbw_factor"]
    q, q_reasons = _nodes(cols, hw, log, options, notes)
    reasons |= np.where(np.isnan(hw["intra"]), why.NO_PROFILE, 0) | q_reasons
    topo = _topology(hw, log, n, q)
    bound_kind = _BOUNDS[cols.code]
    ideal, intra, inter = ideal_by_collective(
        bound_kind, topo["b"], topo["i"], topo["g"], n, q
    )
    evidence = (at, [algo.Evidence.of_run(run) for run in listed])
    measured = (n, q, bw["busbw_calc_gbps"])
    judged = _judged_bounds(
        cols, bound_kind, (topo, hw), evidence, measured, (ideal, intra, inter)
    )
    # A preset matched by GPU name on several nodes, and the log names the NICs NCCL
    # uses: their count is known, their speed is not; the lenient reading takes the
    # slowest plausible one.
    nics_read = (q > 1) & ~np.isnan(log["nics"]) & ~np.isnan(topo["reach"])
    nics_read &= not options.given
    if nics_read.any():
        slowest = np.minimum(1.0, SLOWEST_NIC_GBPS / hw["nic"])
        slow = {**topo, "i": topo["i"] * slowest, "g": topo["g"] * slowest}
        textbook = ideal_by_collective(
            bound_kind, slow["b"], slow["i"], slow["g"], n, q
        )
        judged = _with_lenient(
            judged,
            _judged_bounds(cols, bound_kind, (slow, hw), evidence, measured, textbook),
            nics_read,
            bw["busbw_calc_gbps"],
        )
    ideal, intra, inter = judged.ideal, judged.intra, judged.inter
    has_profile = ~np.isnan(hw["intra"])
    reasons |= np.where((q > 1) & np.isnan(hw["inter"]) & has_profile, why.NO_I, 0)
    reasons |= np.where((bound_kind == Bound.NONE) & has_profile, why.NO_BOUND, 0)
    reasons |= np.where(n == 1, why.ONE_RANK, 0)
    unusable = why.GROUPED | why.CPUTIME | why.NO_COLL | why.NO_N | why.BAD_T
    usable = ((reasons & (unusable | why.ONE_RANK)) == 0) & (cols.size > 0)
    ideal = np.where(usable, ideal, np.nan)
    with np.errstate(divide="ignore", invalid="ignore"):
        eff = bw["busbw_calc_gbps"] / ideal
        ideal_time = cols.time * eff
    reasons |= np.where(eff > 1, why.ABOVE, 0)
    bound = np.where(np.isnan(ideal), -1, np.where((q > 1) & (inter <= intra), 1, 0))
    basis = _basis(options, hw, q, ideal)
    basis = np.where((basis == 2) & nics_read, 3, basis)
    if (basis == 2).any():
        reasons |= np.where(basis == 2, why.ASSUMED, 0)
        notes.append(
            "multi-node ideal from a preset matched by GPU name: its NIC count and "
            "speed are assumed, not read from the log, so efficiency is not judged; "
            "pass --profile (e.g. a cloud SKU) or --inter-bw to judge it"
        )
    if (basis == 3).any():
        notes.append(
            "multi-node ideal from a preset matched by GPU name: the log names the "
            "NICs NCCL uses but not their speed, so the run is judged between the "
            "slowest plausible speed (100 Gb/s per NIC) and the preset's; pass "
            "--profile (e.g. a cloud SKU) or --inter-bw to judge it against yours"
        )

    # The fit needs no busbw factor: IMB pingpong and the like get one too.
    fit_ok = ((reasons & (why.GROUPED | why.CPUTIME | why.BAD_T)) == 0) & cols.named
    fit = fit_series(
        cols.table, fit_ok, cols.size, cols.time, np.nan_to_num(f, nan=1.0)
    )
    reasons |= fit.reasons

    steps = _latency_steps(cols.code, n)
    hw_lat = steps * hw["alpha"]
    staging, st_reasons = _staging(bw["kind"], cols.size, n, q, hw, log)
    gaps = _gaps(cols.time, ideal_time, fit, hw_lat, staging)
    known = ~np.isnan(gaps["gap"])
    reasons |= np.where(known & np.isnan(hw_lat), why.NO_ALPHA, 0)
    reasons |= np.where(known, st_reasons, 0)

    out = measurements
    values = {
        "busbw_factor": arr.floats(f),
        "algbw_calc_gbps": arr.floats(bw["algbw_calc_gbps"]),
        "busbw_calc_gbps": arr.floats(bw["busbw_calc_gbps"]),
        "busbw_mismatch": arr.bools(bw["busbw_mismatch"]),
        "algbw_prescaled": arr.bools(bw["algbw_prescaled"]),
        "ideal_busbw_gbps": arr.floats(ideal),
        "ideal_bound": arr.labels(bound, ("intra", "inter")),
        "ideal_basis": arr.labels(np.where(np.isnan(ideal), -1, basis), BASES),
        "algorithm": _labels(judged.high, usable),
        "algorithm_basis": arr.labels(
            np.where(usable & (judged.high >= 0), judged.basis, -1), ALGORITHM_BASES
        ),
        "expected_busbw_gbps": arr.floats(np.where(usable, judged.expected, np.nan)),
        "ideal_low_busbw_gbps": arr.floats(np.where(usable, judged.ideal_low, np.nan)),
        "algorithm_low": _labels(judged.low, usable),
        "expected_low_busbw_gbps": arr.floats(
            np.where(usable, judged.expected_low, np.nan)
        ),
        "efficiency": arr.floats(eff),
        "ideal_time_us": arr.floats(ideal_time),
        "model_time_us": arr.floats(fit.model_time),
        "model_error_pct": arr.floats(fit.error_pct),
        "regime": arr.labels(fit.regime, ("latency-bound", "bandwidth-bound")),
        "plateau": pa.array(fit.plateau, type=pa.bool_()),
        "fit_class": arr.labels(fit.fit_class, FIT_CLASSES),
        "gap_us": arr.floats(gaps["gap"]),
        "gap_hw_latency_us": arr.floats(gaps["hw_latency"]),
        "gap_latency_us": arr.floats(gaps["latency"]),
        "gap_bandwidth_us": arr.floats(gaps["bandwidth"]),
        "gap_staging_us": arr.floats(gaps["staging"]),
        "gap_residual_us": arr.floats(gaps["residual"]),
        "efficiency_note": why.note_strings(reasons),
    }
    for name in ANALYSED_COLUMNS:
        out = out.append_column(name, values[name])
    return Analysis(out, fit.table, tuple(dict.fromkeys(notes)), profiles)


# How a row's algorithm is known: NCCL said it (per size, or NCCL_ALGO), it is the
# collective's only one (point-to-point, broadcast), NCCL's tuning model chooses it
# given what the log says (NVLS channels), or it is one of several NCCL could have
# chosen (the verdict then states the readings of the lowest and highest).
ALGORITHM_BASES = ("log", "only", "inferred", "assumed")
_POINT_TO_POINT = frozenset({Bound.ALLTOALL, Bound.PAIR, Bound.ROOTED})


@dataclass(frozen=True, slots=True)
class _Judged:
    """Per row: the line-rate bound and terms of the strict reading (the highest
    expected busbw among the algorithms the row could have run and its busbw does
    not rule out), the expected busbw (bound times the healthy fractions) of the
    strict and the lenient (lowest) reading, their algorithm indices
    (:data:`ncclparse.efficiency.algorithms.ALGORITHMS`; -2 point-to-point, -1
    none) and the basis (ALGORITHM_BASES index)."""

    ideal: np.ndarray
    intra: np.ndarray
    inter: np.ndarray
    expected: np.ndarray
    ideal_low: np.ndarray
    expected_low: np.ndarray
    high: np.ndarray
    low: np.ndarray
    basis: np.ndarray


def _judged_bounds(
    c: InputColumns,
    kind: np.ndarray,
    figures: tuple[dict[str, np.ndarray], dict[str, np.ndarray]],
    evidence: tuple[np.ndarray, list[algo.Evidence]],
    measured: tuple[np.ndarray, np.ndarray, np.ndarray],
    textbook: tuple[np.ndarray, np.ndarray, np.ndarray],
) -> _Judged:
    """The bounds a row is judged against (docs/efficiency.md sections 2-4):
    ring-class collectives by algorithm (:mod:`~ncclparse.efficiency.algorithms`),
    the others by their collective's bound; each with its expected busbw."""
    topo, hw = figures
    n, q, busbw = measured
    ideal, intra, inter = textbook
    f_intra, f_net = hw["f_intra"], hw["f_net"]
    with np.errstate(invalid="ignore"):
        expected = np.fmin(intra * f_intra, inter * f_net)
    expected = np.where(np.isnan(ideal), np.nan, expected)
    one_way = np.where(np.isin(kind, list(_POINT_TO_POINT)), -2, algo.RING)
    high = np.where(np.isnan(ideal), -1, one_way)
    basis = np.ones(n.shape, dtype=np.int64)
    ring = (kind == Bound.RING) & ~np.isnan(ideal)
    if not ring.any():
        return _Judged(
            ideal, intra, inter, expected, ideal, expected, high, high.copy(), basis
        )
    at = np.flatnonzero(ring)
    all_reduce = c.code[at] == _ALL_REDUCE
    bound, a_intra, a_inter = algo.algorithm_bounds(
        all_reduce, topo["b"][at], topo["i"][at], n[at], q[at]
    )
    sharp = np.zeros(bound.shape, dtype=bool)
    sharp[[algo.NVLS, algo.NVLS_TREE]] = True
    with np.errstate(invalid="ignore"):
        a_expected = np.fmin(
            a_intra * np.where(sharp, achievable.NVLS.value, f_intra[at]),
            a_inter * f_net[at],
        )
    allowed, row_basis = _allowed(c, at, evidence, n, q)
    low, high_at = algo.lowest_and_highest(
        bound, a_expected, allowed, busbw[at], algo.RULED_OUT
    )
    pick = np.arange(len(at))

    def chosen(values: np.ndarray, index: np.ndarray) -> np.ndarray:
        return np.where(index >= 0, values[np.maximum(index, 0), pick], np.nan)

    ideal, intra, inter = ideal.copy(), intra.copy(), inter.copy()
    ideal[at] = chosen(bound, high_at)
    intra[at] = chosen(a_intra, high_at)
    inter[at] = chosen(a_inter, high_at)
    expected = expected.copy()
    expected[at] = chosen(a_expected, high_at)
    ideal_low, expected_low = ideal.copy(), expected.copy()
    ideal_low[at] = chosen(bound, low)
    expected_low[at] = chosen(a_expected, low)
    high = high.copy()
    low_all = high.copy()
    high[at], low_all[at] = high_at, low
    basis[at] = row_basis
    return _Judged(
        ideal, intra, inter, expected, ideal_low, expected_low, high, low_all, basis
    )


def _with_lenient(
    judged: _Judged, other: _Judged, rows: np.ndarray, busbw: np.ndarray
) -> _Judged:
    """``judged`` with, at ``rows``, the lenient reading of ``other`` where its
    expected busbw is lower and its line rate does not rule it out."""
    with np.errstate(invalid="ignore"):
        possible = ~(busbw > other.ideal_low * (1 + algo.RULED_OUT))
    lower = rows & possible & (other.expected_low < judged.expected_low)
    return dataclasses.replace(
        judged,
        ideal_low=np.where(lower, other.ideal_low, judged.ideal_low),
        expected_low=np.where(lower, other.expected_low, judged.expected_low),
        low=np.where(lower, other.low, judged.low),
    )


def _allowed(
    c: InputColumns,
    at: np.ndarray,
    evidence: tuple[np.ndarray, list[algo.Evidence]],
    n: np.ndarray,
    q: np.ndarray,
) -> tuple[np.ndarray, np.ndarray]:
    """Which algorithms each row at ``at`` could have run (algorithms x rows) and
    how that is known (ALGORITHM_BASES index), one look-up per distinct run,
    collective, topology and (where the log has per-size choices) size."""
    run_index, said = evidence
    run = run_index[at]
    size = np.nan_to_num(c.size[at]).astype(np.int64)
    tuned = np.array([bool(e.tuned) for e in said], dtype=bool)
    # Only per-size choices and NVLS's size threshold tell sizes apart.
    large = np.where(size >= algo.NVLS_FROM_BYTES, algo.NVLS_FROM_BYTES, 0)
    keyed_size = np.where(tuned[run], size, large)
    keys = pd.DataFrame(
        {
            "run": run,
            "code": c.code[at],
            "q": np.nan_to_num(q[at], nan=-1),
            "n": np.nan_to_num(n[at], nan=-1),
            "size": keyed_size,
        }
    )
    # pandas hashes the rows; np.unique(axis=0) sorted them: 1 s at a million.
    inverse = keys.groupby(list(keys.columns), sort=False).ngroup().to_numpy()
    distinct = keys.groupby(list(keys.columns), sort=False).head(1).to_numpy()
    masks = np.zeros((len(algo.ALGORITHMS), len(distinct)), dtype=bool)
    bases = np.zeros(len(distinct), dtype=np.int64)
    for k, (r, code, nodes, ranks, sized) in enumerate(distinct.tolist()):
        found, how = algo.candidates(
            said[int(r)], COLLECTIVES[int(code) - 1], int(sized), nodes, ranks
        )
        masks[list(found), k] = True
        bases[k] = ALGORITHM_BASES.index(how)
    inverse = inverse.reshape(-1)
    return masks[:, inverse], bases[inverse]


def _labels(index: np.ndarray, usable: np.ndarray) -> pa.Array[Any]:
    """Algorithm names of indices (-2: point-to-point, -1 or unusable: null)."""
    p2p = len(algo.ALGORITHMS)
    codes = np.where(usable, np.where(index == -2, p2p, index), -1)
    return arr.labels(codes, (*algo.ALGORITHMS, "p2p"))


def _gaps(
    time: np.ndarray,
    ideal_time: np.ndarray,
    fit: Fit,
    hw_lat: np.ndarray,
    staging: np.ndarray,
) -> dict[str, np.ndarray]:
    """Split each row's gap to the ideal, ``time - ideal_time``, into parts that are
    each >= 0 and add up to it exactly: latency (alpha, its hardware share first),
    host staging, bandwidth shortfall (n/beta beyond the ideal transfer) and the
    unexplained rest. Each part takes what its model says, at most what is left;
    a row faster than the model has no unexplained time (the ``above model`` note).
    Rows above the ideal, without an ideal or without a fit get no parts."""
    gap = time - ideal_time
    known = ~np.isnan(gap) & (gap >= 0) & ~np.isnan(fit.alpha)
    gap = np.where(known, gap, np.nan)
    left = gap
    latency = np.minimum(fit.alpha, left)
    hardware = np.minimum(np.nan_to_num(hw_lat), latency)
    left = left - latency
    staged = np.minimum(np.nan_to_num(staging), left)
    left = left - staged
    wanted = np.nan_to_num(fit.bandwidth_us) - ideal_time - np.nan_to_num(staging)
    shortfall = np.minimum(np.maximum(wanted, 0.0), left)
    residual = left - shortfall
    return {
        "gap": gap,
        "hw_latency": np.where(np.isnan(hw_lat), np.nan, hardware),
        "latency": latency - hardware,
        "staging": np.where(np.isnan(staging), np.nan, staged),
        "bandwidth": shortfall,
        "residual": residual,
    }


def _row_hardware(
    c: InputColumns, options: HardwareOptions, notes: list[str]
) -> tuple[dict[str, np.ndarray], tuple[HardwareProfile, ...]]:
    """Per-row B, I, P, alpha and staging figures, each device's profile resolved
    once; and the distinct profiles used."""
    index, _ = arr.dictionary_codes(c.device)
    names = [None, *pc.unique(c.device.drop_null()).to_pylist()]
    profiles: list[HardwareProfile | None] = []
    if options.profile is not None:
        chosen, found = options.resolve()
        notes[:0] = found
        for name in names:
            other = chosen is not None and another_gpu(chosen, name)
            profiles.append(None if other else chosen)
            if other and chosen is not None:
                notes.append(
                    f"profile {chosen.name} not applied to {name} rows: it describes "
                    "another GPU; pass a profile for that GPU to judge them"
                )
    else:
        for name in names:
            chosen, found = options.resolve(name)
            profiles.append(chosen)
            notes.extend(found)
    present = [profiles[i] for i in np.unique(index)]
    used = tuple({p.summary(): p for p in present if p is not None}.values())

    def pick(attr: str, default: float = np.nan) -> np.ndarray:
        values = [
            default
            if p is None or getattr(p, attr) is None
            else float(getattr(p, attr))
            for p in profiles
        ]
        return np.array(values, dtype=np.float64)[index]

    hosts = pick("hosts_per_node")
    links = [
        (
            achievable.intra_fraction(None if p is None else p.intra_link),
            achievable.net_fraction(None if p is None else p.net_link),
        )
        for p in profiles
    ]
    fractions = np.array(links, dtype=np.float64).reshape(len(profiles), 2)[index]
    figures = {
        "intra": pick("intra_gbps"),
        "inter": pick("inter_gbps"),
        "gpus": pick("gpus_per_node"),
        "hosts": hosts,
        "alpha": pick("alpha_us"),
        "pcie": pick("pcie_gbps"),
        "staged": pick("host_staging", 0.0) > 0,
        "link": pick("link_gbps"),
        "nics": pick("nics_per_node"),
        "nic": pick("nic_gbps"),
        "f_intra": fractions[:, 0],
        "f_net": fractions[:, 1],
    }
    mesh = [p is not None and p.intra_topology == "mesh" for p in profiles]
    figures["mesh"] = np.array(mesh, dtype=bool)[index]
    # A profile made from --intra-bw alone does not know P: never infer Q from it.
    custom = [
        p is not None and p.name == "custom" and not options.gpus_per_node
        for p in profiles
    ]
    figures["gpus"] = np.where(
        np.array(custom, dtype=bool)[index], np.nan, figures["gpus"]
    )

    return figures, used


def _nodes(
    c: InputColumns,
    hw: dict[str, np.ndarray],
    log: dict[str, np.ndarray],
    options: HardwareOptions,
    notes: list[str],
) -> tuple[np.ndarray, np.ndarray]:
    """Q per row: --nodes, else N/--gpus-per-node, else the log's hosts (grouped into
    the profile's NVLink domains), else N over the log's GPUs per node, else inferred
    from the profile's GPUs per node."""
    n = c.nranks
    nodes, gpus_per_node = options.nodes, options.gpus_per_node
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
                f"{given} does not divide the rank count ({counts}): every node must "
                "hold the same number of ranks (as the AIBooster ideal assumes)"
            )
        return q, np.zeros(n.shape, dtype=np.int64)
    with np.errstate(invalid="ignore", divide="ignore"):
        from_hosts = np.ceil(c.nnodes / np.fmax(hw["hosts"], 1.0))
        from_local = n / log["local_ranks"]
        inferred = np.where(n <= hw["gpus"], 1.0, n / hw["gpus"])
    from_local = np.where(from_local % 1 == 0, from_local, np.nan)
    inferred = np.where(inferred % 1 == 0, inferred, np.nan)
    q = np.where(np.isnan(from_hosts), from_local, from_hosts)
    guessed = np.isnan(q) & ~np.isnan(inferred) & ~np.isnan(n)
    q = np.where(np.isnan(q), inferred, q)
    if guessed.any():
        notes.append(
            "node count not in the log: assumed full nodes of the profile's GPUs per "
            "node (one node when N <= P); pass --nodes to set it"
        )
    if (hw["hosts"] > 1).any() and not np.isnan(c.nnodes).all():
        notes.append(
            "hosts grouped into NVLink domains of the profile to count nodes (Q)"
        )
    reasons = np.where(np.isnan(q) & ~np.isnan(hw["intra"]), why.NO_Q, 0)
    with np.errstate(invalid="ignore"):
        uneven = ~np.isnan(q) & ((n % q != 0) | (q > n))
    reasons |= np.where(uneven, why.UNEVEN, 0)
    return np.where(uneven, np.nan, q), reasons


def _runs_of(
    measurements: pa.Table, runs: pa.Table | None
) -> tuple[np.ndarray, list[dict[str, Any]]]:
    """Per row, the index of its run in the list returned: that run's ``runs`` row
    or, without one, the row's own tool and device. One look-up per run, not per
    row: a million rows hold a few runs."""
    facts: dict[tuple[str, int], dict[str, Any]] = {}
    if runs is not None:
        for run in runs.to_pylist():
            facts[(run["source"], run["run"])] = run
    if measurements.num_rows == 0:
        return np.zeros(0, dtype=np.int64), []
    source = arr.key_codes(measurements.column("source"))
    run_no = arr.key_codes(measurements.column("run"))
    pairs = np.stack([source, run_no]).T
    _, first, at = np.unique(pairs, axis=0, return_index=True, return_inverse=True)
    picked = measurements.take(pa.array(first, type=pa.int64())).select(
        ["source", "run", "tool", "device"]
    )
    listed = [
        facts.get((row["source"], row["run"]))
        or {"tool": row["tool"], "devices": [row["device"]]}
        for row in picked.to_pylist()
    ]
    return np.asarray(at, dtype=np.int64).reshape(-1), listed


def _run_topology(
    at: np.ndarray, listed: list[dict[str, Any]]
) -> dict[str, np.ndarray]:
    """Per row (``at``: its run in ``listed``, :func:`_runs_of`), what its run's log
    says: NICs in use, GPUs per node, GPUDirect RDMA (1 yes, 0 no, NaN not said)."""
    facts = np.full((len(listed) + 1, 3), np.nan)
    for index, run in enumerate(listed):
        # Only NICs of an RDMA transport stand for the profile's NICs; a socket
        # fallback's interfaces do not (the verdict names that fallback).
        rdma = run.get("net") not in (None, "Socket")
        nics, local, gdr = run.get("nics"), run.get("local_ranks"), run.get("gdr")
        facts[index] = (
            len(nics) if nics and rdma else np.nan,
            np.nan if local is None else float(local),
            np.nan if gdr is None else float(gdr),
        )
    table = facts[at] if len(at) else facts[:0]
    return {"nics": table[:, 0], "local_ranks": table[:, 1], "gdr": table[:, 2]}


def _topology(
    hw: dict[str, np.ndarray],
    log: dict[str, np.ndarray],
    n: np.ndarray,
    q: np.ndarray,
) -> dict[str, np.ndarray]:
    """B, I and one GPU's network bandwidth g for the P = N/Q local GPUs of each row.

    B: a mesh gives P GPUs (P-1) links; a switch gives every GPU its intra_gbps. I:
    the node's I, at most the NICs the P GPUs reach times the NIC speed (NICs serve
    a node's GPUs evenly; the log's NIC count replaces the profile's). g: the NICs of
    one GPU, at most I; without NIC figures, I shared by the node's GPUs.
    """
    with np.errstate(divide="ignore", invalid="ignore"):
        p = n / q
        b = np.where(
            hw["mesh"], np.where(p > 1, (p - 1) * hw["link"], np.inf), hw["intra"]
        )
        nics = np.where(np.isnan(log["nics"]), hw["nics"], log["nics"])
        per_gpu = nics / hw["gpus"]
        reach = np.fmin(nics, np.ceil(p * per_gpu))
        reach = np.where(np.isnan(reach), nics, reach)
        has_nics = ~np.isnan(nics) & ~np.isnan(hw["nic"])
        i = np.where(has_nics, np.fmin(hw["inter"], reach * hw["nic"]), hw["inter"])
        own = np.ceil(np.where(np.isnan(per_gpu), nics / p, per_gpu)) * hw["nic"]
        sharing = np.where(np.isnan(hw["gpus"]), p, hw["gpus"])
        g = np.where(has_nics, np.fmin(i, own), i / sharing)
    return {"b": b, "i": i, "g": g, "reach": np.where(has_nics, reach, np.nan)}


def _basis(
    options: HardwareOptions,
    hw: dict[str, np.ndarray],
    q: np.ndarray,
    ideal: np.ndarray,
) -> np.ndarray:
    """Index into BASES per row (-1 without an ideal)."""
    given = np.zeros(q.shape, dtype=np.int64)
    base = given if options.given else np.where(q > 1, 2, 1)
    return np.where(np.isnan(ideal), -1, base)


def _latency_steps(code: np.ndarray, n: np.ndarray) -> np.ndarray:
    """Fewest alpha steps per row (:func:`ncclparse.collectives.latency_steps`)."""
    with np.errstate(divide="ignore", invalid="ignore"):
        log = np.ceil(np.log2(np.maximum(n, 1)))
    steps = _STEPS[code]
    return np.select(
        [
            steps == Steps.ONE,
            steps == Steps.LOG,
            steps == Steps.TWO_LOG,
            steps == Steps.LINEAR,
        ],
        [np.ones_like(n), log, 2 * log, n - 1],
        np.nan,
    )


def _staging(
    kind: np.ndarray,
    size: np.ndarray,
    n: np.ndarray,
    q: np.ndarray,
    hw: dict[str, np.ndarray],
    log: dict[str, np.ndarray],
) -> tuple[np.ndarray, np.ndarray]:
    """Aurora data-path model Eq. 6 host staging, 2*2*Z/(P*B_PCIe), on multi-node
    all-reduce: where the profile says the path stages through the host, or the log
    shows network connections without GPUDirect RDMA (and PCIe is known)."""
    no_gdr = (log["gdr"] == 0) & ~np.isnan(hw["pcie"])
    staged = (hw["staged"] | no_gdr) & (q > 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        term = 4 * size / ((n / q) * hw["pcie"] * 1e3)
    reduce_all = kind == BusbwKind.REDUCE_ALL  # all_reduce: the only one modelled
    value = np.where(staged, np.where(reduce_all, term, np.nan), 0.0)
    return value, np.where(staged & ~reduce_all, why.STAGING, 0)
