"""Hardware profiles: the peak figures efficiency is judged against, with their sources.

A profile gives the B (per-GPU unidirectional intra-node bandwidth) and I (per-node
unidirectional inter-node bandwidth) of AIBooster's ideal, the GPUs that share one
intra-node fabric, and where they matter the NIC, PCIe, Xe-link and MDFI figures of the
Aurora data-path models. Every figure names its source; figures we could not source are
left ``None``, never guessed.

Profiles come from :data:`PRESETS`, from a TOML file (:func:`load_profile`), from CLI
flags, or from the GPU name a log prints (:func:`match_device`), which is always
reported as an assumption. This module does the choosing (loading, matching,
overriding); the record is :mod:`~ncclparse.efficiency.profile`, the preset table
with its sources :mod:`~ncclparse.efficiency.presets`, both re-exported here.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

from ncclparse._settings import (
    Count,
    Figure,
    Flag,
    Number,
    SettingError,
    Spec,
    Table,
    Word,
    checked,
    read_toml,
)
from ncclparse.efficiency.presets import PRESETS
from ncclparse.efficiency.profile import HardwareProfile
from ncclparse.errors import ProfileError
from ncclparse.units import bandwidth_gbps, time_us

__all__ = [
    "PRESETS",
    "HardwareOptions",
    "HardwareProfile",
    "load_profile",
    "match_device",
    "resolve_profile",
]

# What a profile file may give each key: a figure as a number or a string with a
# unit; counts are whole numbers, flags true or false, words strings. A boolean is
# never a number (``intra_gbps = true`` would be 1 GB/s, and every log would pass).
_BANDWIDTH = Figure(bandwidth_gbps)
_COUNT = Count(1, 100_000)
_KEYS: dict[str, Spec] = {
    "name": Word(),
    "description": Word(),
    "gpus_per_node": _COUNT,
    "intra_gbps": _BANDWIDTH,
    "inter_gbps": _BANDWIDTH,
    "hosts_per_node": _COUNT,
    "alpha_us": Figure(time_us),
    "intra_topology": Word(("switch", "mesh")),
    "link_gbps": _BANDWIDTH,
    "nics_per_node": _COUNT,
    "nic_gbps": _BANDWIDTH,
    "nic_derating": Number(0, 1, above=True),
    "pcie_gbps": _BANDWIDTH,
    "xe_link_gbps": _BANDWIDTH,
    "xe_links": _COUNT,
    "mdfi_gbps": _BANDWIDTH,
    "host_staging": Flag(),
    "device_pattern": Word(),
    "intra_link": Word(),
    "net_link": Word(),
    "gpu_pattern": Word(),
    "base": Word(),
    "sources": Table(),
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

    Raises ProfileError naming the file for a missing file, one that is not UTF-8
    TOML, an unknown key or a bad value.
    """
    path = Path(path)
    try:
        data = read_toml(path)
    except SettingError as exc:
        raise ProfileError(
            str(exc).replace(": cannot read:", ": cannot read profile:")
        ) from None
    try:
        return profile_from_mapping(data, default_name=path.stem)
    except ProfileError as exc:
        raise ProfileError(f"{path}: {exc}") from None


def profile_from_mapping(data: dict[str, Any], *, default_name: str) -> HardwareProfile:
    """Build a profile from a TOML-like mapping (see :func:`load_profile`).

    Raises ProfileError naming the key for an unknown key or a value of the wrong
    type or range."""
    unknown = set(data) - set(_KEYS)
    if unknown:
        known = ", ".join(sorted(_KEYS))
        raise ProfileError(
            f"unknown profile key(s) {sorted(unknown)}: known keys: {known}"
        )
    try:
        data = {key: checked(_KEYS[key], value, key) for key, value in data.items()}
    except SettingError as exc:
        raise ProfileError(str(exc)) from None
    base_name = data.pop("base", None)
    sources = data.pop("sources", {})
    values: dict[str, Any] = {}
    if base_name is not None:
        values.update(_preset(str(base_name)).as_dict())
        sources = {**values.pop("sources"), **sources}
    values["name"] = default_name
    values["description"] = (
        f"user profile based on {base_name}" if base_name else "user profile"
    )
    values.update(data)
    if "intra_gbps" not in values or "gpus_per_node" not in values:
        raise ProfileError(
            f"profile {values['name']!r} needs intra_gbps and gpus_per_node "
            f"(or base = one of {', '.join(PRESETS)})"
        )
    values["sources"] = tuple((str(k), str(v)) for k, v in dict(sources).items())
    return HardwareProfile(**values)


def match_device(device: str | None) -> HardwareProfile | None:
    """Return the preset whose GPU the log's device name names, or None.

    The first preset whose ``device_pattern`` occurs in ``device`` (case-insensitive)
    wins: ``"NVIDIA H100 80GB HBM3"`` gives h100, ``"NVIDIA H800"`` h800,
    ``"AMD Instinct MI300X VF"`` (an SR-IOV VM) mi300x. PCIe and NVL variants
    (``"NVIDIA H100 PCIe"``, ``"NVIDIA H100 NVL"``, ``"NVIDIA H200 NVL"``,
    ``"NVIDIA A100-PCIE-40GB"``: no NVSwitch) match no preset, on purpose. Cloud
    SKUs (``aws-p5``, ``gcp-a3-mega`` ...) have no pattern and are never matched: the
    GPU name cannot tell them from a DGX, so they are chosen with ``--profile``.
    """
    if not device:
        return None
    for profile in PRESETS.values():
        if profile.device_pattern and re.search(profile.device_pattern, device, re.I):
            return profile
    return None


@dataclass(frozen=True, slots=True)
class HardwareOptions:
    """What the user said about the hardware, carried as one value from the command
    line (or the caller) to the engine, which resolves it once per device.

    ``profile`` is a profile, a preset name or a TOML path (None: match the device a
    log names); ``intra_bw``/``inter_bw``/``gpus_per_node`` override B, I and P (GB/s
    or with units); ``nodes`` sets Q for every row; ``hw_latency`` is the hardware's
    per-step latency (µs or with a unit).
    """

    profile: HardwareProfile | str | Path | None = None
    intra_bw: str | float | None = None
    inter_bw: str | float | None = None
    gpus_per_node: int | None = None
    nodes: int | None = None
    hw_latency: str | float | None = None

    @property
    def given(self) -> bool:
        """Whether the user named the hardware (a profile, B or I): the ideal is
        then theirs, not a preset matched by GPU name."""
        return (
            self.profile is not None
            or self.intra_bw is not None
            or self.inter_bw is not None
        )

    @classmethod
    def of(
        cls, hardware: HardwareOptions | HardwareProfile | str | Path | None
    ) -> HardwareOptions:
        """``hardware`` as options: a profile, preset name or path becomes
        ``HardwareOptions(profile=...)``."""
        if isinstance(hardware, HardwareOptions):
            return hardware
        return cls(profile=hardware)

    def resolve(
        self, device_name: str | None = None
    ) -> tuple[HardwareProfile | None, list[str]]:
        """The profile for rows of ``device_name`` (see :func:`resolve_profile`)."""
        return resolve_profile(
            self.profile,
            intra_bw=self.intra_bw,
            inter_bw=self.inter_bw,
            gpus_per_node=self.gpus_per_node,
            hw_latency=self.hw_latency,
            device_name=None if self.profile is not None else device_name,
        )


def another_gpu(profile: HardwareProfile, device: str | None) -> bool:
    """Whether ``device`` names a GPU other than ``profile``'s: the device is one a
    preset knows (``match_device``) and the profile's GPU pattern does not match it.
    A device no preset knows ("NVIDIA Graphics Device", a PCIe card) or a profile
    that names no GPU is never another."""
    pattern = profile.device_pattern or profile.gpu_pattern
    if not device or pattern is None or match_device(device) is None:
        return False
    return re.search(pattern, device, re.I) is None


def _is_path(text: str) -> bool:
    """Whether ``text`` names an existing path (no: a name the OS refuses)."""
    try:
        return Path(text).exists()
    except (OSError, ValueError):  # too long for a file name; a NUL character
        return False


def resolve_profile(
    name_or_path: HardwareProfile | str | Path | None = None,
    *,
    intra_bw: str | float | None = None,
    inter_bw: str | float | None = None,
    gpus_per_node: int | None = None,
    hw_latency: str | float | None = None,
    device_name: str | None = None,
) -> tuple[HardwareProfile | None, list[str]]:
    """Pick the profile: given, a preset name or TOML path, or from the device name.

    Returns ``(profile, assumptions)``; profile is None when nothing identifies the
    hardware. Overrides replace B, I, P (and ``hw_latency`` the per-step hardware
    latency alpha, e.g. ``"2us"``) of whatever was chosen; with no profile and no
    matching device, ``intra_bw`` alone makes a custom profile (I then unknown).
    Raises ProfileError for an unknown preset or a bad file or figure.
    """
    notes: list[str] = []
    profile: HardwareProfile | None = None
    if isinstance(name_or_path, HardwareProfile):
        profile = name_or_path
    elif name_or_path is not None:
        text = str(name_or_path)
        looks_like_file = text.endswith(".toml") or _is_path(text)
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
        if profile.nics_per_node:
            # The node's I is its NICs together: the same NICs at the given total.
            changes["nic_gbps"] = changes["inter_gbps"] / profile.nics_per_node
    if gpus_per_node is not None:
        changes["gpus_per_node"] = int(gpus_per_node)
        changes["hosts_per_node"] = 1
    if hw_latency is not None:
        changes["alpha_us"] = time_us(hw_latency)
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
