"""Hardware profiles: the peak figures efficiency is judged against, with their sources.

A profile gives seed 003's B (per-GPU unidirectional intra-node bandwidth) and I
(per-node unidirectional inter-node bandwidth), the GPUs that share one intra-node
fabric, and where they matter the NIC, PCIe, Xe-link and MDFI figures of seed 004's
data-path models. Every figure names its source; figures we could not source are left
``None``, never guessed.

Profiles come from :data:`PRESETS`, from a TOML file (:func:`load_profile`), from CLI
flags, or from the GPU name a log prints (:func:`match_device`), which is always
reported as an assumption.
"""

from __future__ import annotations

import re
import tomllib
from dataclasses import dataclass, fields, replace
from pathlib import Path
from typing import Any

from .errors import ProfileError
from .units import bandwidth_gbps, time_us

__all__ = [
    "PRESETS",
    "HardwareProfile",
    "load_profile",
    "match_device",
    "resolve_profile",
]


@dataclass(frozen=True, slots=True)
class HardwareProfile:
    """Peak figures of one system; bandwidths in GB/s (1e9 B/s), unidirectional.

    ``gpus_per_node`` counts the ranks that share the intra-node fabric B (for GB200
    NVL72 the whole 72-GPU NVLink domain, made of ``hosts_per_node`` = 18 hosts).
    ``alpha_us`` is the per-message hardware latency, ``None`` when unknown.
    ``host_staging`` says the inter-node path copies through host memory over PCIe (seed
    004, Eq. 6). ``sources`` maps each figure's field name to where it comes from.
    """

    name: str
    description: str
    gpus_per_node: int
    intra_gbps: float
    inter_gbps: float | None = None
    hosts_per_node: int = 1
    alpha_us: float | None = None
    nics_per_node: int | None = None
    nic_gbps: float | None = None
    nic_derating: float | None = None
    pcie_gbps: float | None = None
    xe_link_gbps: float | None = None
    xe_links: int | None = None
    mdfi_gbps: float | None = None
    host_staging: bool = False
    device_pattern: str | None = None
    sources: tuple[tuple[str, str], ...] = ()

    def __post_init__(self) -> None:
        if self.gpus_per_node < 1 or self.hosts_per_node < 1:
            raise ProfileError(f"profile {self.name!r}: gpus_per_node must be >= 1")
        for name in ("intra_gbps", "inter_gbps", "nic_gbps", "pcie_gbps"):
            value = getattr(self, name)
            if value is not None and not value > 0:
                raise ProfileError(f"profile {self.name!r}: {name} must be positive")
        if self.host_staging and self.pcie_gbps is None:
            raise ProfileError(
                f"profile {self.name!r}: host_staging needs pcie_gbps (seed 004, Eq. 6)"
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


_NVIDIA_NVLINK = (
    "NVIDIA {gpu} datasheet: NVLink {bidir} GB/s bidirectional per GPU, halved"
)
_CX7 = "{n} x ConnectX-7 400 Gb/s (50 GB/s) per node, {system} datasheet"

PRESETS: dict[str, HardwareProfile] = {
    p.name: p
    for p in (
        HardwareProfile(
            name="a100",
            description="DGX/HGX A100 8-GPU, NVSwitch, 8 x HDR 200 Gb/s",
            gpus_per_node=8,
            intra_gbps=300.0,
            inter_gbps=200.0,
            nics_per_node=8,
            nic_gbps=25.0,
            device_pattern=r"\bA100\b(?!.*PCIE)",
            sources=(
                ("intra_gbps", _NVIDIA_NVLINK.format(gpu="A100 SXM4", bidir=600)),
                (
                    "inter_gbps",
                    "8 x ConnectX-6 HDR 200 Gb/s (25 GB/s), DGX A100 datasheet",
                ),
                ("nic_gbps", "200 Gb/s HDR InfiniBand = 25 GB/s"),
            ),
        ),
        HardwareProfile(
            name="h100",
            description="DGX/HGX H100 8-GPU, NVSwitch, 8 x NDR 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"\bH100\b(?!.*(PCIE|NVL))",
            sources=(
                (
                    "intra_gbps",
                    _NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                    + "; seed 003 uses B = 450 GB/s",
                ),
                (
                    "inter_gbps",
                    _CX7.format(n=8, system="DGX H100")
                    + "; seed 000: 8 x 400 Gbps NICs = 400 GB/s per node",
                ),
                ("nic_gbps", "400 Gb/s NDR InfiniBand = 50 GB/s (seed 000, seed 002)"),
            ),
        ),
        HardwareProfile(
            name="h200",
            description="DGX/HGX H200 8-GPU, NVSwitch, 8 x NDR 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"\bH200\b",
            sources=(
                ("intra_gbps", _NVIDIA_NVLINK.format(gpu="H200 SXM", bidir=900)),
                ("inter_gbps", _CX7.format(n=8, system="DGX H200")),
                ("nic_gbps", "400 Gb/s NDR InfiniBand = 50 GB/s"),
            ),
        ),
        HardwareProfile(
            name="b200",
            description="DGX/HGX B200 8-GPU, NVLink 5 switch, 8 x 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=900.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"(?<![A-Za-z])B200\b",
            sources=(
                ("intra_gbps", _NVIDIA_NVLINK.format(gpu="B200", bidir=1800)),
                ("inter_gbps", _CX7.format(n=8, system="DGX B200")),
                ("nic_gbps", "400 Gb/s = 50 GB/s"),
            ),
        ),
        HardwareProfile(
            name="gb200-nvl72",
            description="GB200 NVL72 rack: one 72-GPU NVLink domain of 18 hosts",
            gpus_per_node=72,
            hosts_per_node=18,
            intra_gbps=900.0,
            inter_gbps=3600.0,
            nics_per_node=72,
            nic_gbps=50.0,
            device_pattern=r"\bGB200\b",
            sources=(
                ("intra_gbps", _NVIDIA_NVLINK.format(gpu="GB200 NVL72", bidir=1800)),
                (
                    "inter_gbps",
                    "one 400 Gb/s NIC per GPU (NVIDIA DGX GB200 reference "
                    "design): 72 x 50 GB/s per NVLink domain",
                ),
                (
                    "gpus_per_node",
                    "NVIDIA GB200 NVL72 spec: 72 GPUs in one NVLink domain",
                ),
            ),
        ),
        HardwareProfile(
            name="mi300x",
            description="AMD Instinct MI300X 8-GPU platform, Infinity Fabric mesh",
            gpus_per_node=8,
            intra_gbps=448.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"MI300X",
            sources=(
                (
                    "intra_gbps",
                    "AMD Instinct MI300X datasheet: 7 Infinity Fabric links x "
                    "128 GB/s bidirectional = 896 GB/s, halved",
                ),
                (
                    "inter_gbps",
                    "typical 8 x 400 Gb/s NICs per node (AMD MI300X platform "
                    "reference); override with --inter-bw for your cluster",
                ),
            ),
        ),
        HardwareProfile(
            name="aurora",
            description="Intel Max 1550 'Aurora' node: 6 GPUs x 2 tiles",
            gpus_per_node=12,
            intra_gbps=53.0,
            inter_gbps=200.0,
            nics_per_node=8,
            nic_gbps=23.0,
            nic_derating=0.8,
            pcie_gbps=42.0,
            xe_link_gbps=15.0,
            xe_links=6,
            mdfi_gbps=196.0,
            host_staging=True,
            device_pattern=r"Max 1550",
            sources=(
                ("gpus_per_node", "seed 004: up to 12 ranks (tiles) per node"),
                (
                    "intra_gbps",
                    "seed 004 sec. 2/5: Xe-link 53 GB/s unidirectional [Int23]",
                ),
                ("inter_gbps", "seed 004 sec. 2: 8 NICs x 25 GB/s theoretical"),
                ("nic_gbps", "seed 004 sec. 3: 23 GB/s, the figure its tables use"),
                ("nic_derating", "seed 004 sec. 3.1: 80 % of NIC capacity achievable"),
                (
                    "pcie_gbps",
                    "seed 004 sec. 3: 42 GB/s used in its tables (55 best, 64 max)",
                ),
                ("xe_link_gbps", "seed 004 sec. 2: 15 GB/s, ALCF acceptance data"),
                (
                    "xe_links",
                    "Aurora node: 6 GPUs; seed 004 tables imply one Xe-link "
                    "per GPU engaged (R/2 for R ranks)",
                ),
                (
                    "mdfi_gbps",
                    "seed 004 sec. 2: 196 GB/s, ALCF acceptance data (~220 spec)",
                ),
                (
                    "host_staging",
                    "seed 004 Eq. 6: data copied to host and back over PCIe",
                ),
            ),
        ),
    )
}

_FIGURES = {
    "intra_gbps": bandwidth_gbps,
    "inter_gbps": bandwidth_gbps,
    "nic_gbps": bandwidth_gbps,
    "pcie_gbps": bandwidth_gbps,
    "xe_link_gbps": bandwidth_gbps,
    "mdfi_gbps": bandwidth_gbps,
    "alpha_us": time_us,
}
_PLAIN = {
    "name",
    "description",
    "gpus_per_node",
    "hosts_per_node",
    "nics_per_node",
    "nic_derating",
    "xe_links",
    "host_staging",
    "device_pattern",
}


def load_profile(path: str | Path) -> HardwareProfile:
    """Read a profile from TOML; bandwidths as strings with units or numbers in GB/s.

    Keys are the :class:`HardwareProfile` fields; ``base = "h100"`` starts from a
    preset; a ``[sources]`` table names where figures come from. Example::

        name = "my-cluster"
        base = "h100"              # start from a preset
        inter_gbps = "3200Gbps"    # 8 x 400 Gb/s NICs; same as "400GB/s"
        alpha_us = "2us"
        [sources]
        inter_gbps = "our fabric acceptance test"

    Raises ProfileError for a missing file, bad TOML, an unknown key or a bad figure.
    """
    path = Path(path)
    try:
        data = tomllib.loads(path.read_text(encoding="utf-8"))
    except OSError as exc:
        raise ProfileError(
            f"cannot read profile {str(path)!r}: {exc.strerror}"
        ) from exc
    except tomllib.TOMLDecodeError as exc:
        raise ProfileError(f"profile {str(path)!r} is not valid TOML: {exc}") from exc
    return profile_from_mapping(data, default_name=path.stem)


def profile_from_mapping(data: dict[str, Any], *, default_name: str) -> HardwareProfile:
    """Build a profile from a TOML-like mapping (see :func:`load_profile`)."""
    data = dict(data)
    base_name = data.pop("base", None)
    sources = data.pop("sources", {})
    unknown = set(data) - set(_FIGURES) - _PLAIN
    if unknown:
        known = ", ".join(sorted(set(_FIGURES) | _PLAIN | {"base", "sources"}))
        raise ProfileError(
            f"unknown profile key(s) {sorted(unknown)}: known keys: {known}"
        )
    values: dict[str, Any] = {}
    if base_name is not None:
        values.update(_preset(str(base_name)).as_dict())
        sources = {**values.pop("sources"), **sources}
    values["name"] = default_name
    values["description"] = (
        f"user profile based on {base_name}" if base_name else "user profile"
    )
    for key, raw in data.items():
        values[key] = _FIGURES[key](raw) if key in _FIGURES else raw
    if "intra_gbps" not in values or "gpus_per_node" not in values:
        raise ProfileError(
            f"profile {values['name']!r} needs intra_gbps and gpus_per_node "
            f"(or base = one of {', '.join(PRESETS)})"
        )
    values["sources"] = tuple((str(k), str(v)) for k, v in dict(sources).items())
    try:
        return HardwareProfile(**values)
    except TypeError as exc:  # a wrong type for a plain key, e.g. gpus_per_node = "8"
        raise ProfileError(f"profile {values['name']!r}: {exc}") from exc


def match_device(device: str | None) -> HardwareProfile | None:
    """Return the preset whose GPU the log's device name names, or None.

    PCIe and NVL variants (no NVSwitch) match no preset, on purpose.
    """
    if not device:
        return None
    for profile in PRESETS.values():
        if profile.device_pattern and re.search(profile.device_pattern, device, re.I):
            return profile
    return None


def resolve_profile(
    name_or_path: HardwareProfile | str | Path | None = None,
    *,
    intra_bw: str | float | None = None,
    inter_bw: str | float | None = None,
    gpus_per_node: int | None = None,
    device_name: str | None = None,
) -> tuple[HardwareProfile | None, list[str]]:
    """Pick the profile: given, a preset name or TOML path, or from the device name.

    Returns ``(profile, assumptions)``; profile is None when nothing identifies the
    hardware. Overrides replace B, I, P of whatever was chosen; with no profile and no
    matching device, ``intra_bw`` alone makes a custom profile (I then unknown).
    Raises ProfileError for an unknown preset or a bad file or figure.
    """
    notes: list[str] = []
    profile: HardwareProfile | None = None
    if isinstance(name_or_path, HardwareProfile):
        profile = name_or_path
    elif name_or_path is not None:
        text = str(name_or_path)
        looks_like_file = text.endswith(".toml") or Path(text).exists()
        profile = load_profile(text) if looks_like_file else _preset(text)
    elif device_name is not None:
        profile = match_device(device_name)
        if profile is not None:
            notes.append(
                f"no profile given: device {device_name!r} matched preset "
                f"{profile.summary()}; pass --profile to choose another"
            )
    if profile is None and intra_bw is not None:
        profile = HardwareProfile(
            name="custom",
            description="from command-line figures",
            gpus_per_node=gpus_per_node or 1,
            intra_gbps=bandwidth_gbps(intra_bw),
            sources=(("intra_gbps", "command line"),),
        )
    if profile is None:
        return None, notes
    changes: dict[str, Any] = {}
    if intra_bw is not None:
        changes["intra_gbps"] = bandwidth_gbps(intra_bw)
    if inter_bw is not None:
        changes["inter_gbps"] = bandwidth_gbps(inter_bw)
    if gpus_per_node is not None:
        changes["gpus_per_node"] = int(gpus_per_node)
        changes["hosts_per_node"] = 1
    if changes and profile.name != "custom":
        shown = ", ".join(f"{k}={v:g}" for k, v in changes.items())
        notes.append(
            f"profile {profile.name!r} overridden on the command line: {shown}"
        )
    if changes:
        src = dict(profile.sources) | dict.fromkeys(changes, "command line")
        profile = replace(profile, **changes, sources=tuple(src.items()))
    return profile, notes


def _preset(name: str) -> HardwareProfile:
    try:
        return PRESETS[name.lower()]
    except KeyError:
        raise ProfileError(
            f"unknown hardware profile {name!r}: use one of {', '.join(PRESETS)} "
            f"or a .toml file"
        ) from None
