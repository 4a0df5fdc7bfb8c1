"""``ncclparse ideal``, ``model`` and ``profiles``: the cost models and presets.

Each prints readable text: the result, then the formula and the arithmetic that gives
it, so every number can be checked by hand. ``--json`` prints the machine form.
"""

from __future__ import annotations

import functools
import json
import re
import textwrap
from collections.abc import Callable
from typing import TYPE_CHECKING, Any

import click

from ncclparse.cli.options import show_values

if TYPE_CHECKING:
    from ncclparse.efficiency.ideal import IdealBandwidth
    from ncclparse.efficiency.profile import HardwareProfile


@click.command()
@click.option("--intra-bw", required=True, help="B, per-GPU intra-node bandwidth.")
@click.option("--inter-bw", help="I, per-node inter-node bandwidth (multi-node).")
@click.option("--gpus-per-node", type=int, required=True, help="P, ranks per node.")
@click.option("--nodes", type=int, default=1, show_default=True, help="Q, nodes.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def ideal(
    intra_bw: str, inter_bw: str | None, gpus_per_node: int, nodes: int, as_json: bool
) -> None:
    """Print the ideal bus bandwidth (the AIBooster ideal) and both of its terms."""
    from ncclparse.efficiency import ideal_bandwidth
    from ncclparse.units import bandwidth_gbps

    found = ideal_bandwidth(
        intra_bw, inter_bw, gpus_per_node=gpus_per_node, nodes=nodes
    )
    if as_json:
        show_values(found.as_dict(), as_json)
        return
    b = bandwidth_gbps(intra_bw)
    i = None if inter_bw is None else bandwidth_gbps(inter_bw)
    for line in ideal_lines(found, b, i, gpus_per_node):
        click.echo(line)


def ideal_lines(found: IdealBandwidth, b: float, i: float | None, p: int) -> list[str]:
    """The ideal and its two terms with their arithmetic (B, I in GB/s, P per node)."""
    from ncclparse.formatting import format_gbps

    n, q = found.ranks, found.nodes
    where = f"{_plural(n, 'rank')} on {_plural(q, 'node')}"
    if q == 1:
        lines = [
            f"ideal bus bandwidth: {format_gbps(found.ideal_busbw_gbps)} ({where}: "
            "B, the per-GPU intra-node bandwidth)"
        ]
        if i is not None:
            lines.append("  on one node the inter-node bandwidth I does not enter")
        return lines
    bound = "inter-node" if found.bound == "inter" else "intra-node"
    inter_sum = f"{_num(i)} x {n - 1} x {q} / ({n} x {q - 1})"
    inter_value = format_gbps(found.inter_term_gbps)
    if found.intra_term_gbps is None:
        intra_sum, intra_value = "unbounded (one GPU per node: N = Q)", ""
    else:
        intra_sum = f"{_num(b)} x {n - 1} / {n - q}"
        intra_value = format_gbps(found.intra_term_gbps)
    width = max(len(inter_sum), len(intra_sum) if intra_value else 0)
    intra = f"{intra_sum:<{width}} = {intra_value}" if intra_value else intra_sum
    return [
        f"ideal bus bandwidth: {format_gbps(found.ideal_busbw_gbps)} ({where}, "
        f"bound by the {bound} term)",
        f"  inter-node term  I(N-1)Q/(N(Q-1)) = {inter_sum:<{width}} = {inter_value}",
        f"  intra-node term  B(N-1)/(N-Q)     = {intra}",
        f"  with B = {_num(b)} GB/s per GPU, I = {_num(i)} GB/s per node, "
        f"P = {_plural(p, 'GPU')} per node, Q = {q} nodes, N = PQ = {n}",
    ]


# (what the algorithm does, latency steps, bandwidth multiplier of n/beta): the
# formulas of ncclparse.efficiency.costmodels, in words.
_TREE_NOTE = (
    "  note: NCCL's own tree is pipelined (the buffer flows through the tree in "
    "chunks), so real NCCL tree times are lower than this model's"
)
_ALGORITHM_TEXT: dict[tuple[str, str], tuple[str, str, str]] = {
    ("sendrecv", "direct"): ("one message of n bytes", "1", "1"),
    ("broadcast", "tree"): (
        "a non-pipelined binomial tree, ceil(log2 P) steps, each moving the whole "
        "buffer",
        "ceil(log2 P)",
        "ceil(log2 P)",
    ),
    ("reduce", "tree"): (
        "a non-pipelined binomial tree, ceil(log2 P) steps, each moving the whole "
        "buffer",
        "ceil(log2 P)",
        "ceil(log2 P)",
    ),
    ("scatter", "binomial"): (
        "binomial tree, ceil(log2 P) steps moving (P-1)/P of the buffer in all",
        "ceil(log2 P)",
        "(P-1)/P",
    ),
    ("gather", "binomial"): (
        "binomial tree, ceil(log2 P) steps moving (P-1)/P of the buffer in all",
        "ceil(log2 P)",
        "(P-1)/P",
    ),
    ("all_reduce", "ring"): (
        "reduce-scatter then all-gather around a ring, 2(P-1) steps of n/P",
        "2(P-1)",
        "2(P-1)/P",
    ),
    ("all_reduce", "tree"): (
        "a non-pipelined binomial tree (reduce then broadcast), 2 ceil(log2 P) "
        "steps, each moving the whole buffer",
        "2 ceil(log2 P)",
        "2 ceil(log2 P)",
    ),
    ("all_reduce", "rhd"): (
        "recursive halving-doubling (reduce-scatter by halving, all-gather by "
        "doubling)",
        "2 ceil(log2 P)",
        "2(P-1)/P",
    ),
    ("all_gather", "ring"): ("a ring, P-1 steps of n/P", "P-1", "(P-1)/P"),
    ("reduce_scatter", "ring"): ("a ring, P-1 steps of n/P", "P-1", "(P-1)/P"),
    ("alltoall", "pairwise"): (
        "pairwise exchange, P-1 steps of n/P",
        "P-1",
        "(P-1)/P",
    ),
}


@click.command()
@click.argument("collective")
@click.option("--size", required=True, help="Message size, e.g. 10GB.")
@click.option("--ranks", type=int, help="P, ranks in the collective.")
@click.option("--alpha", help="Per-step latency, e.g. 2us.")
@click.option("--bandwidth", help="Per-link bandwidth, e.g. 50GB/s.")
@click.option(
    "--algorithm",
    help="ring, tree, rhd, binomial, pairwise, direct; or "
    "hierarchical, scale-out, scale-up (two-level and Aurora data-path models).",
)
@click.option("--gpus-per-node", type=int, help="hierarchical: GPUs per node.")
@click.option("--nodes", type=int, help="hierarchical / scale-out: nodes.")
@click.option("--intra-alpha", help="hierarchical: intra-node latency.")
@click.option("--intra-bandwidth", help="hierarchical: intra-node bandwidth.")
@click.option("--inter-alpha", help="hierarchical: inter-node latency.")
@click.option("--inter-bandwidth", help="hierarchical: inter-node bandwidth.")
@click.option("--nic-bandwidth", help="scale-out: bandwidth of one NIC.")
@click.option("--nics-per-node", type=int, default=1, show_default=True)
@click.option(
    "--derating",
    type=float,
    default=0.8,
    show_default=True,
    help="scale-out: achievable fraction of NIC bandwidth (Aurora data-path model).",
)
@click.option("--ranks-per-node", type=int, default=1, show_default=True)
@click.option("--xe-bandwidth", help="scale-out / scale-up: Xe-link bandwidth.")
@click.option("--xe-links", type=int, default=0, show_default=True)
@click.option("--pcie-bandwidth", help="scale-out: host staging over PCIe.")
@click.option("--mdfi-bandwidth", help="scale-up: MDFI bandwidth between tiles.")
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def model(
    collective: str, size: str, algorithm: str | None, as_json: bool, **options: Any
) -> None:
    """Predict a collective's time from a cost model, with its terms."""
    from ncclparse.efficiency import costmodels

    o = options
    render: Callable[[Any, str, dict[str, Any]], list[str]]
    if algorithm == "hierarchical":
        _require(
            o,
            "hierarchical",
            "gpus_per_node",
            "nodes",
            "intra_alpha",
            "intra_bandwidth",
            "inter_alpha",
            "inter_bandwidth",
        )
        found: Any = costmodels.hierarchical_all_reduce(
            size,
            o["gpus_per_node"],
            o["nodes"],
            o["intra_alpha"],
            o["intra_bandwidth"],
            o["inter_alpha"],
            o["inter_bandwidth"],
        )
        render = _hierarchical_lines
    elif algorithm == "scale-out":
        _require(o, "scale-out", "nodes", "nic_bandwidth")
        found = costmodels.scale_out_all_reduce(
            size,
            o["nodes"],
            nic_bandwidth=o["nic_bandwidth"],
            nics_per_node=o["nics_per_node"],
            derating=o["derating"],
            ranks_per_node=o["ranks_per_node"],
            xe_bandwidth=o["xe_bandwidth"],
            xe_links=o["xe_links"],
            pcie_bandwidth=o["pcie_bandwidth"],
        )
        render = _scale_out_lines
    elif algorithm == "scale-up":
        _require(o, "scale-up", "xe_bandwidth")
        found = costmodels.scale_up_all_reduce(
            size,
            o["ranks_per_node"],
            xe_bandwidth=o["xe_bandwidth"],
            mdfi_bandwidth=o["mdfi_bandwidth"],
        )
        render = _scale_up_lines
    else:
        if None in (o["ranks"], o["alpha"], o["bandwidth"]):
            raise click.UsageError("--ranks, --alpha and --bandwidth are required")
        found = costmodels.predict(
            collective, size, o["ranks"], o["alpha"], o["bandwidth"], algorithm
        )
        render = functools.partial(
            _predict_lines, collective=collective, algorithm=algorithm
        )
    if as_json:
        show_values(found.as_dict(), as_json)
        return
    for line in render(found, size, o):
        click.echo(line)


def _require(options: dict[str, Any], algorithm: str, *names: str) -> None:
    missing = [f"--{n.replace('_', '-')}" for n in names if options[n] is None]
    if missing:
        raise click.UsageError(f"--algorithm {algorithm} needs {', '.join(missing)}")


def _predict_lines(
    found: Any,
    size: str,
    o: dict[str, Any],
    *,
    collective: str,
    algorithm: str | None,
) -> list[str]:
    from ncclparse.efficiency import costmodels
    from ncclparse.formatting import format_time_us
    from ncclparse.units import bandwidth_gbps, size_bytes, time_us

    names = {c.replace("_", ""): c for c in costmodels.ALGORITHMS}
    coll = names.get(re.sub(r"[\s_-]", "", collective.lower()), collective)
    algo = algorithm or costmodels.ALGORITHMS[coll][0]
    p, n = o["ranks"], size_bytes(size)
    alpha, beta = time_us(o["alpha"]), bandwidth_gbps(o["bandwidth"])
    # The model's own step count and multiplier: alpha = 1 µs with no data gives the
    # steps, one unit of data at 1 GB/s with no latency the multiplier.
    steps = costmodels.predict(coll, 0.0, p, 1.0, 1.0, algo).latency_us
    multiplier = costmodels.predict(coll, 1e3, p, 0.0, 1.0, algo).bandwidth_us
    what, steps_formula, multiplier_formula = _ALGORITHM_TEXT.get(
        (coll, algo), (algo, "steps", "multiplier")
    )
    latency_formula = f"{steps_formula} x alpha"
    bandwidth_formula = f"{multiplier_formula} x n/beta"
    latency_sum = f"{_num(steps)} x {format_time_us(alpha)}"
    bandwidth_sum = f"{_ratio(multiplier, p)} x {_size(n)} / {_num(beta)} GB/s"
    fw = max(len(latency_formula), len(bandwidth_formula))
    sw = max(len(latency_sum), len(bandwidth_sum))
    regime = costmodels.regime(found.latency_us, found.bandwidth_us)
    lines = [
        f"{coll} of {_size(n)} on {_plural(p, 'rank')}, {algo}: {what}",
        f"predicted time: {format_time_us(found.time_us)} = "
        f"{format_time_us(found.latency_us)} latency + "
        f"{format_time_us(found.bandwidth_us)} bandwidth ({regime})",
        f"  latency term    {latency_formula:<{fw}} = {latency_sum:<{sw}} = "
        f"{format_time_us(found.latency_us)}",
        f"  bandwidth term  {bandwidth_formula:<{fw}} = {bandwidth_sum:<{sw}} = "
        f"{format_time_us(found.bandwidth_us)}",
    ]
    if algo == "tree":
        lines.append(_TREE_NOTE)
    return lines


def _hierarchical_lines(found: Any, size: str, o: dict[str, Any]) -> list[str]:
    from ncclparse.formatting import format_time_us as t
    from ncclparse.units import bandwidth_gbps, size_bytes, time_us

    g, q, n = o["gpus_per_node"], o["nodes"], size_bytes(size)
    a_intra, a_inter = time_us(o["intra_alpha"]), time_us(o["inter_alpha"])
    b_intra, b_inter = (
        bandwidth_gbps(o["intra_bandwidth"]),
        bandwidth_gbps(o["inter_bandwidth"]),
    )
    rs, ar, ag = found.reduce_scatter, found.all_reduce, found.all_gather

    def phase(number: int, name: str, p: Any) -> str:
        total = f"{t(p.time_us)} = {t(p.latency_us)} + {t(p.bandwidth_us)}"
        return f"  {number}. {name:<27} {total}"

    return [
        f"all_reduce of {_size(n)} on {q} nodes x {g} GPUs, hierarchical (two-level): "
        "intra-node reduce-scatter, inter-node ring all-reduce of n/G, "
        "intra-node all-gather",
        f"predicted time: {t(found.time_us)} = {t(found.latency_us)} latency + "
        f"{t(found.bandwidth_us)} bandwidth",
        phase(1, "intra-node reduce-scatter", rs),
        f"       (G-1) alpha_intra + (G-1)/G n/beta_intra = {g - 1} x {t(a_intra)} + "
        f"{g - 1}/{g} x {_size(n)} / {_num(b_intra)} GB/s",
        phase(2, "inter-node ring all-reduce", ar),
        f"       2(N-1) alpha_inter + 2(N-1)/N (n/G)/beta_inter = "
        f"{2 * (q - 1)} x {t(a_inter)} + {2 * (q - 1)}/{q} x {_size(n / g)} / "
        f"{_num(b_inter)} GB/s",
        phase(3, "intra-node all-gather", ag) + " (as phase 1)",
        f"  with G = {g} GPUs per node, N = {q} nodes, n = {_size(n)}",
    ]


def _scale_out_lines(found: Any, size: str, o: dict[str, Any]) -> list[str]:
    from ncclparse.formatting import format_time_us as t
    from ncclparse.units import bandwidth_gbps, size_bytes

    z, q, r = size_bytes(size), o["nodes"], o["ranks_per_node"]
    d, nics, nic = o["derating"], o["nics_per_node"], bandwidth_gbps(o["nic_bandwidth"])
    staged = o["pcie_bandwidth"] is not None
    head = "scale-out (Eq. 4)" + (" with host staging (Eq. 6)" if staged else "")
    if r > 1:
        xe = bandwidth_gbps(o["xe_bandwidth"])
        up = f"2 x {_size(z)} / 2 / ({o['xe_links']} x {_num(xe)} GB/s)"
    else:
        up = "0 (one rank per node)"
    lines = [
        f"all_reduce of {_size(z)} on {_plural(q, 'node')} "
        f"({_plural(r, 'rank')} per node), Aurora data-path model, {head}",
        f"predicted time: {t(found.time_us)} = {t(found.scale_up_us)} scale-up + "
        f"{t(found.scale_out_us)} scale-out + {t(found.staging_us)} host staging "
        "(the model has no latency term)",
        f"  scale-up (Xe-link)   2 (Z/2) / (n_Xe B_Xe) = {up} = {t(found.scale_up_us)}",
        f"  scale-out (NICs)     2Z / (d n_NIC B_NIC) x (Q-1)/Q = 2 x {_size(z)} / "
        f"({_num(d)} x {nics} x {_num(nic)} GB/s) x {q - 1}/{q} = "
        f"{t(found.scale_out_us)}",
    ]
    if staged:
        pcie = bandwidth_gbps(o["pcie_bandwidth"])
        lines.append(
            f"  host staging (PCIe)  2 x 2Z / (R B_PCIe) = 4 x {_size(z)} / "
            f"({r} x {_num(pcie)} GB/s) = {t(found.staging_us)}"
        )
    return lines


def _scale_up_lines(found: Any, size: str, o: dict[str, Any]) -> list[str]:
    from ncclparse.efficiency import costmodels
    from ncclparse.formatting import format_time_us as t
    from ncclparse.units import bandwidth_gbps, size_bytes

    z, r = size_bytes(size), o["ranks_per_node"]
    xe = bandwidth_gbps(o["xe_bandwidth"])
    xe_only = costmodels.scale_up_all_reduce(size, r, xe_bandwidth=xe).scale_up_us
    lines = [
        f"all_reduce of {_size(z)} on {_plural(r, 'rank')} of one node, Aurora "
        "data-path model, scale-up (Eq. 10)",
        f"predicted time: {t(found.time_us)} (the model has no latency term)",
        f"  Xe-link  2 (Z/R) / B_Xe   = 2 x {_size(z)} / {r} / {_num(xe)} GB/s = "
        f"{t(xe_only)}",
    ]
    if o["mdfi_bandwidth"] is not None:
        mdfi = bandwidth_gbps(o["mdfi_bandwidth"])
        lines.append(
            f"  MDFI     2 (Z/R) / B_MDFI = 2 x {_size(z)} / {r} / {_num(mdfi)} GB/s "
            f"= {t(found.scale_up_us - xe_only)}"
        )
    else:
        lines.append("  MDFI     not given: the MDFI term is left out")
    return lines


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json: bool) -> None:
    """List the built-in hardware profiles with their figures and sources."""
    from ncclparse.efficiency.hardware import PRESETS

    if as_json:
        click.echo(json.dumps({k: p.as_dict() for k, p in PRESETS.items()}, indent=2))
        return
    blocks = ["\n".join(profile_lines(preset)) for preset in PRESETS.values()]
    click.echo("\n\n".join(blocks))


_LABEL = 10  # width of the figure names in a profile block
_WRAP = 88


def profile_lines(profile: HardwareProfile) -> list[str]:
    """One profile as a block: its figures, each followed by its source."""
    lines = [f"{profile.name}: {profile.description}"]

    def figure(label: str, value: str, *fields: tuple[str, str]) -> None:
        """``fields``: (field name, what it gives) for each figure ``value`` shows."""
        lines.append(f"  {label:<{_LABEL}}{value}")
        cited: dict[str, list[str]] = {}
        for name, what in fields:
            cited.setdefault(profile.source(name) or "unknown", []).append(what)
        for text, whats in cited.items():
            head = "source: " if len(cited) == 1 else f"source ({', '.join(whats)}): "
            lines.append(
                textwrap.fill(
                    text,
                    width=_WRAP,
                    initial_indent=" " * (2 + _LABEL) + head,
                    subsequent_indent=" " * (2 + _LABEL + 4),
                    break_long_words=False,
                    break_on_hyphens=False,
                )
            )

    def unknown(label: str, hint: str = "") -> None:
        hint = f"; {hint}" if hint else ""
        lines.append(f"  {label:<{_LABEL}}unknown (no public source found{hint})")

    figure(
        "B", f"{_num(profile.intra_gbps)} GB/s per GPU, intra-node", ("intra_gbps", "B")
    )
    if profile.inter_gbps is None:
        unknown("I", "pass --inter-bw")
    else:
        figure(
            "I",
            f"{_num(profile.inter_gbps)} GB/s per node, inter-node",
            ("inter_gbps", "I"),
        )
    figure(
        "P", f"{_plural(profile.gpus_per_node, 'GPU')} per node", ("gpus_per_node", "P")
    )
    if profile.hosts_per_node != 1:
        figure(
            "hosts",
            f"{profile.hosts_per_node} hosts make up one node (NVLink domain)",
            ("hosts_per_node", "hosts"),
        )
    if profile.nics_per_node is None or profile.nic_gbps is None:
        unknown("NICs")
    else:
        figure(
            "NICs",
            f"{profile.nics_per_node} x {_num(profile.nic_gbps)} GB/s "
            f"({_num(profile.nic_gbps * 8)} Gb/s each)",
            ("nics_per_node", "count"),
            ("nic_gbps", "speed"),
        )
    if profile.intra_topology == "mesh" and profile.link_gbps is not None:
        figure(
            "topology",
            f"mesh, {_num(profile.link_gbps)} GB/s per peer link (P GPUs reach "
            f"(P-1) x {_num(profile.link_gbps)} GB/s)",
            ("intra_topology", "topology"),
            ("link_gbps", "link"),
        )
    else:
        lines.append(
            f"  {'topology':<{_LABEL}}switch (every GPU reaches B whatever the "
            "number of peers)"
        )
    extras = (
        ("alpha", "alpha_us", "{:g} µs per step"),
        ("derating", "nic_derating", "{:g} of NIC bandwidth achievable"),
        ("PCIe", "pcie_gbps", "{:g} GB/s"),
        ("Xe-link", "xe_link_gbps", "{:g} GB/s per link"),
        ("Xe-links", "xe_links", "{:d} engaged"),
        ("MDFI", "mdfi_gbps", "{:g} GB/s"),
    )
    for label, name, form in extras:
        value = getattr(profile, name)
        if value is not None:
            figure(label, form.format(value), (name, label))
    if profile.host_staging:
        figure(
            "staging",
            "inter-node data copied through host memory",
            ("host_staging", "staging"),
        )
    if profile.device_pattern:
        lines.append(
            f"  {'matches':<{_LABEL}}GPU names matching /{profile.device_pattern}/"
        )
    else:
        lines.append(
            f"  {'matches':<{_LABEL}}no GPU name; choose it with --profile "
            f"{profile.name}"
        )
    return lines


def _num(value: float | None) -> str:
    """A figure as written in the arithmetic: 450, 12.5, 0.8."""
    return "unknown" if value is None else f"{value:g}"


def _plural(count: int, noun: str) -> str:
    return f"{count} {noun}{'s' * (count != 1)}"


def _size(n: float) -> str:
    """A byte count in decimal units (the bandwidths are decimal): 10 GB, 1.049 MB."""
    for unit, scale in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6), ("kB", 1e3)):
        if n >= scale:
            return f"{n / scale:.4g} {unit}"
    return f"{n:g} B"


def _ratio(value: float, p: int) -> str:
    """A multiplier as the model writes it: 8, 510/256 (for 2(P-1)/P), or 1.992."""
    if abs(value - round(value)) < 1e-9:
        return str(round(value))
    numerator = value * p
    if abs(numerator - round(numerator)) < 1e-6:
        return f"{round(numerator)}/{p}"
    return f"{value:.4g}"
