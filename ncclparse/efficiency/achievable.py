"""What healthy hardware reaches of its line rate, per link type, with the source.

A verdict that judged busbw against line rate would put healthy machines near its
warning line (an 8 x MI300X node reaches 70 % of its xGMI line rate; an NVLink 4
ring ~82 %), so efficiency is shown against line rate (physics) and judged against
the line rate times the fraction a healthy link of that type reaches. A profile
names its links (``intra_link``, ``net_link``); an unnamed link gets the lowest
fraction of its side, so that it is never judged more strictly than a named one.
The calibration of these figures against real logs is in docs/efficiency.md
("Calibration").
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["INTRA", "NET", "NVLS", "Fraction", "intra_fraction", "net_fraction"]


@dataclass(frozen=True, slots=True)
class Fraction:
    """The busbw a healthy link reaches, as a fraction of its line rate."""

    value: float
    source: str


INTRA: dict[str, Fraction] = {
    "nvlink3": Fraction(
        0.77,
        "A100 NVLink 3: 230.8 of 300 GB/s busbw on one p4d node (NVIDIA/nccl #527); "
        "'close to 240 GB/s' (kiskra-nvidia, NVIDIA/nccl #1712)",
    ),
    "nvlink4": Fraction(
        0.82,
        "H100 NVLink 4: ~370 of 450 GB/s for rings and all_gather/reduce_scatter "
        "(sjeaugey, NVIDIA/nccl-tests #212); 365-370 GB/s (NVIDIA/nccl #1455)",
    ),
    "nvlink5": Fraction(
        0.82,
        "Blackwell NVLink 5: no maintainer figure; taken as NVLink 4's "
        "(a GB200 NVL72 log shows 758-839 of 900 GB/s, CoreWeave nccl-tests)",
    ),
    "xgmi": Fraction(
        0.75,
        "AMD Infinity Fabric: RCCL models 48 of 64 GB/s per link after protocol and "
        "error-correction overhead (gilbertlee-amd, ROCm/rccl #1210)",
    ),
    "pcie": Fraction(
        0.75,
        "PCIe: NCCL's topology counts 24 of 32 GB/s for Gen4 x16, 48 of 64 for Gen5 "
        "(src/graph/topo.cc in NVIDIA/nccl)",
    ),
}
# NVLink SHARP all_reduce on one node: ~480 GB/s busbw on 8 H100 (sjeaugey,
# NVIDIA/nccl-tests #212; 476, AddyLaddy, #290) of the 2(N-1)/N x 450 = 787.5 GB/s
# that each GPU's NVLink would allow sending and receiving its whole buffer once.
NVLS = Fraction(
    0.61,
    "NVLS all_reduce: ~480 of 787.5 GB/s on 8 H100 (sjeaugey, NVIDIA/nccl-tests "
    "#212; AddyLaddy, #290)",
)
NET: dict[str, Fraction] = {
    "ib": Fraction(
        0.96,
        "InfiniBand: 24 of 25 GB/s per HDR NIC (sjeaugey, NVIDIA/nccl-tests #119), "
        "48 of 50 per NDR NIC (AddyLaddy, NVIDIA/nccl-tests #290, #319)",
    ),
    "roce": Fraction(
        0.80,
        "RoCE: no maintainer figure; users report 320-330 of 400 GB/s with "
        "8 x 400 Gb/s RoCE (NVIDIA/nccl #1221)",
    ),
    "efa": Fraction(
        0.80,
        "AWS EFA: no published healthy ring figure; the lowest documented fraction",
    ),
    "slingshot": Fraction(
        0.80,
        "HPE Slingshot: 80 % of NIC capacity achievable (Aurora data-path model)",
    ),
    "tcpx": Fraction(
        0.80,
        "GPUDirect-TCPX/TCPXO: no published healthy ring figure; the lowest "
        "documented fraction",
    ),
}
UNKNOWN_INTRA = min(f.value for f in INTRA.values())
UNKNOWN_NET = min(f.value for f in NET.values())


def intra_fraction(link: str | None) -> float:
    """The healthy fraction of an intra-node link (unknown: the lowest)."""
    found = INTRA.get(link or "")
    return UNKNOWN_INTRA if found is None else found.value


def net_fraction(link: str | None) -> float:
    """The healthy fraction of a network link (unknown: the lowest)."""
    found = NET.get(link or "")
    return UNKNOWN_NET if found is None else found.value
