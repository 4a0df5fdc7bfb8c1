"""The hardware profile record: one system's peak figures and where each comes from.

:class:`HardwareProfile` checks its figures when built;
:mod:`~ncclparse.efficiency.hardware` re-exports it with the presets and the ways of
choosing a profile.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import Any

from ncclparse.efficiency.achievable import INTRA, NET
from ncclparse.errors import ProfileError


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """Peak figures of one system; bandwidths in GB/s (1e9 B/s), unidirectional.

    ``gpus_per_node`` counts the ranks that share the intra-node fabric B (for GB200
    NVL72 the whole 72-GPU NVLink domain, made of ``hosts_per_node`` = 18 hosts).
    ``alpha_us`` is the per-message hardware latency, ``None`` when unknown.
    ``intra_topology`` is ``"switch"`` (every GPU reaches the fabric at ``intra_gbps``
    whatever the number of peers, as through NVSwitch) or ``"mesh"`` (direct links,
    ``link_gbps`` each way to each peer: P GPUs of a node reach ``(P-1) x link_gbps``,
    as AMD Infinity Fabric). ``nics_per_node`` NICs of ``nic_gbps`` each serve the
    node's ``gpus_per_node`` GPUs evenly (rail-optimized): P GPUs reach
    ``ceil(P x nics_per_node / gpus_per_node)`` of them.
    ``host_staging`` says the inter-node path copies through host memory over PCIe
    (Aurora data-path model, Eq. 6). ``intra_link`` and ``net_link`` name the link
    types (:mod:`~ncclparse.efficiency.achievable`: ``nvlink3``, ``nvlink4``,
    ``nvlink5``, ``xgmi``, ``pcie``; ``ib``, ``roce``, ``efa``, ``slingshot``,
    ``tcpx``) whose healthy fraction of line rate the verdict judges against; None
    is the lowest of its side. ``gpu_pattern`` names the GPU of a profile that is
    never matched by device name (a cloud SKU); ``device_pattern`` serves for the
    others. ``sources`` maps each figure's field name to where
    it comes from.
    """

    name: str
    description: str
    gpus_per_node: int
    intra_gbps: float
    inter_gbps: float | None = None
    hosts_per_node: int = 1
    alpha_us: float | None = None
    intra_topology: str = "switch"
    link_gbps: float | None = None
    nics_per_node: int | None = None
    nic_gbps: float | None = None
    nic_derating: float | None = None
    pcie_gbps: float | None = None
    xe_link_gbps: float | None = None
    xe_links: int | None = None
    mdfi_gbps: float | None = None
    host_staging: bool = False
    device_pattern: str | None = None
    intra_link: str | None = None
    net_link: str | None = None
    gpu_pattern: str | None = None
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.hosts_per_node < 1:
            raise ProfileError(f"profile {self.name!r}: gpus_per_node must be >= 1")
        if self.intra_topology not in ("switch", "mesh"):
            raise ProfileError(
                f"profile {self.name!r}: intra_topology must be 'switch' or 'mesh'"
            )
        if self.intra_topology == "mesh" and self.link_gbps is None:
            raise ProfileError(f"profile {self.name!r}: a mesh needs link_gbps")
        for name in ("intra_gbps", "inter_gbps", "nic_gbps", "pcie_gbps", "link_gbps"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ProfileError(f"profile {self.name!r}: {name} must be positive")
        for name, known in (("intra_link", INTRA), ("net_link", NET)):
            value = getattr(self, name)
            if value is not None and value not in known:
                raise ProfileError(
                    f"profile {self.name!r}: {name} must be one of "
                    f"{', '.join(sorted(known))}, not {value!r}"
                )
        if self.host_staging and self.pcie_gbps is None:
            raise ProfileError(
                f"profile {self.name!r}: host_staging needs pcie_gbps "
                "(Aurora data-path model, Eq. 6)"
            )

    def source(self, figure: str) -> str | None:
        """Return the source of ``figure`` (a field name), or None when not stated."""
        return dict(self.sources).get(figure)

    def summary(self) -> str:
        """One line with B, I and P, for assumption messages and listings."""
        inter = "unknown" if self.inter_gbps is None else f"{self.inter_gbps:g} GB/s"
        return (
            f"{self.name} ({self.description}): B={self.intra_gbps:g} GB/s per GPU, "
            f"I={inter} per node, {self.gpus_per_node} GPUs per node"
        )

    def as_dict(self) -> dict[str, Any]:
        """All figures and their sources as plain JSON-ready values."""
        out: dict[str, Any] = {f.name: getattr(self, f.name) for f in fields(self)}
        out["sources"] = dict(self.sources)
        return out
