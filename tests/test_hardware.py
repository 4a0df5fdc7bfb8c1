"""Hardware profiles: presets with sources, TOML profiles, device matching, overrides."""

from __future__ import annotations

from pathlib import Path

import pytest

from ncclparse.efficiency.hardware import (
    PRESETS,
    HardwareProfile,
    load_profile,
    match_device,
    resolve_profile,
)
from ncclparse.errors import ProfileError


def test_required_presets_exist_with_sources() -> None:
    for name in ("a100", "h100", "h200", "b200", "gb200-nvl72", "mi300x", "aurora"):
        profile = PRESETS[name]
        assert profile.intra_gbps > 0
        assert profile.source("intra_gbps"), name
        assert profile.inter_gbps is None or profile.source("inter_gbps"), name


def test_h100_matches_published_figures() -> None:
    """AIBooster's ideal example B = 450 GB/s; 8 x 400 Gbps NICs = 400 GB/s per node."""
    h100 = PRESETS["h100"]
    assert (h100.intra_gbps, h100.inter_gbps, h100.gpus_per_node) == (450.0, 400.0, 8)


def test_aurora_has_data_path_projection_figures() -> None:
    aurora = PRESETS["aurora"]
    assert aurora.nic_gbps == 23.0  # the figure the Aurora projection's tables use
    assert aurora.nic_derating == 0.8
    assert aurora.pcie_gbps == 42.0
    assert aurora.xe_link_gbps == 15.0
    assert aurora.mdfi_gbps == 196.0
    assert aurora.nics_per_node == 8
    assert aurora.host_staging
    assert "Data Center GPU Max Series product brief" in (
        aurora.source("intra_gbps") or ""
    )


@pytest.mark.parametrize(
    ("device", "preset"),
    [
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("NVIDIA GB200", "gb200-nvl72"),
        ("AMD Instinct MI300X", "mi300x"),
        ("Intel(R) Data Center GPU Max 1550", "aurora"),
        ("NVIDIA A100-PCIE-40GB", None),  # no NVSwitch: no preset fits
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA GeForce RTX 4090", None),
        (None, None),
    ],
)
def test_match_device(device: str | None, preset: str | None) -> None:
    found = match_device(device)
    assert (found.name if found else None) == preset


def test_resolve_from_device_is_an_assumption() -> None:
    profile, notes = resolve_profile(device_name="NVIDIA H100 80GB HBM3")
    assert profile is PRESETS["h100"]
    assert len(notes) == 1
    assert "device 'NVIDIA H100 80GB HBM3' matched preset h100" in notes[0]
    assert "--profile" in notes[0]


def test_resolve_overrides_and_custom() -> None:
    profile, notes = resolve_profile("h100", inter_bw="1600Gbps")
    assert profile is not None
    assert profile.inter_gbps == 200.0
    assert profile.source("inter_gbps") == "command line"
    assert notes == ["profile 'h100' overridden on the command line: inter_gbps=200"]
    custom, notes = resolve_profile(
        intra_bw="450GB/s", inter_bw="100GB/s", gpus_per_node=8
    )
    assert custom is not None
    assert (custom.name, custom.intra_gbps, custom.inter_gbps) == ("custom", 450, 100)
    assert notes == []
    assert resolve_profile() == (None, [])


def test_unknown_preset() -> None:
    with pytest.raises(
        ProfileError, match="unknown hardware profile 'h900': use one of a100"
    ):
        resolve_profile("h900")


def test_toml_profile(tmp_path: Path) -> None:
    path = tmp_path / "cluster.toml"
    path.write_text(
        'base = "h100"\ninter_gbps = "3200Gbps"\nalpha_us = "2us"\n'
        '[sources]\ninter_gbps = "acceptance test 2025-01"\n'
    )
    profile, _ = resolve_profile(path)
    assert profile is not None
    assert (profile.name, profile.intra_gbps, profile.inter_gbps) == (
        "cluster",
        450,
        400,
    )
    assert profile.alpha_us == 2.0
    assert profile.source("inter_gbps") == "acceptance test 2025-01"
    assert profile.source("intra_gbps")  # kept from the preset


def test_toml_profile_from_scratch(tmp_path: Path) -> None:
    path = tmp_path / "lab.toml"
    path.write_text('name = "lab"\nintra_gbps = 100\ngpus_per_node = 4\n')
    profile = load_profile(path)
    assert (profile.name, profile.intra_gbps, profile.inter_gbps) == (
        "lab",
        100.0,
        None,
    )


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ('intra_gbps = "450G"\ngpus_per_node = 8', "bandwidth '450G' is ambiguous"),
        ("intra_gbps = 450", "needs intra_gbps and gpus_per_node"),
        ('base = "h100"\nbogus = 1', "unknown profile key(s) ['bogus']"),
        ("intra_gbps = ", "is not valid TOML"),
        (
            'base = "h100"\nhost_staging = true',
            "host_staging needs pcie_gbps (Aurora data-path model, Eq. 6)",
        ),
    ],
)
def test_bad_toml(tmp_path: Path, text: str, message: str) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text)
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert message in str(info.value)


def test_missing_profile_file(tmp_path: Path) -> None:
    with pytest.raises(ProfileError, match="cannot read profile"):
        load_profile(tmp_path / "nope.toml")


def test_profile_is_frozen_and_listable() -> None:
    profile = PRESETS["b200"]
    with pytest.raises(AttributeError):
        profile.intra_gbps = 1.0  # type: ignore[misc]
    data = profile.as_dict()
    assert data["intra_gbps"] == 900.0
    assert isinstance(data["sources"], dict)
    assert "B=900 GB/s" in profile.summary()
    with pytest.raises(ProfileError, match="must be positive"):
        HardwareProfile(name="x", description="", gpus_per_node=8, intra_gbps=0.0)
