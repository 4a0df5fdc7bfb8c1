"""``ncclparse ideal``, ``model`` and ``profiles``: the cost models and presets."""

from __future__ import annotations

import json
from typing import Any

import click

from ncclparse.cli.options import show_values


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

    found = ideal_bandwidth(
        intra_bw, inter_bw, gpus_per_node=gpus_per_node, nodes=nodes
    )
    show_values(found.as_dict(), as_json)


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
    if algorithm == "hierarchical":
        found: Any = costmodels.hierarchical_all_reduce(
            size,
            o["gpus_per_node"],
            o["nodes"],
            o["intra_alpha"],
            o["intra_bandwidth"],
            o["inter_alpha"],
            o["inter_bandwidth"],
        )
    elif algorithm == "scale-out":
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
    elif algorithm == "scale-up":
        found = costmodels.scale_up_all_reduce(
            size,
            o["ranks_per_node"],
            xe_bandwidth=o["xe_bandwidth"],
            mdfi_bandwidth=o["mdfi_bandwidth"],
        )
    else:
        if None in (o["ranks"], o["alpha"], o["bandwidth"]):
            raise click.UsageError("--ranks, --alpha and --bandwidth are required")
        found = costmodels.predict(
            collective, size, o["ranks"], o["alpha"], o["bandwidth"], algorithm
        )
    show_values(found.as_dict(), as_json)


@click.command()
@click.option("--json", "as_json", is_flag=True, help="Print JSON.")
def profiles(as_json: bool) -> None:
    """List the built-in hardware profiles with their figures and sources."""
    from ncclparse.efficiency.hardware import PRESETS

    if as_json:
        click.echo(json.dumps({k: p.as_dict() for k, p in PRESETS.items()}, indent=2))
    else:
        for preset in PRESETS.values():
            click.echo(preset.summary())
