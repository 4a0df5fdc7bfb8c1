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


# Figures a preset may state; each one it states needs a source.
_FIGURES = (
    "gpus_per_node",
    "intra_gbps",
    "inter_gbps",
    "alpha_us",
    "link_gbps",
    "nics_per_node",
    "nic_gbps",
    "nic_derating",
    "pcie_gbps",
    "xe_link_gbps",
    "xe_links",
    "mdfi_gbps",
)


def _stated(profile: HardwareProfile) -> list[str]:
    stated = [f for f in _FIGURES if getattr(profile, f) is not None]
    if profile.hosts_per_node != 1:
        stated.append("hosts_per_node")
    if profile.intra_topology != "switch":
        stated.append("intra_topology")
    if profile.host_staging:
        stated.append("host_staging")
    return stated


@pytest.mark.parametrize("name", list(PRESETS))
def test_every_stated_figure_has_a_source(name: str) -> None:
    profile = PRESETS[name]
    for figure in _stated(profile):
        assert profile.source(figure), f"{name}.{figure} has no source"
    assert set(dict(profile.sources)) <= set(_stated(profile)), (
        f"{name} cites a figure it does not state"
    )


@pytest.mark.parametrize(
    ("name", "gpus", "intra", "inter", "nics", "nic"),
    [
        # NVLink 400 GB/s bidirectional (DeepSeek); NICs unsourced, so unknown.
        ("h800", 8, 200.0, None, None, None),
        # 4 GPU NICs x 200 Gb/s = 800 Gb/s = 100 GB/s per node.
        ("gcp-a3-high", 8, 450.0, 100.0, 4, 25.0),
        # 8 x 200 Gb/s = 1,600 Gb/s = 200 GB/s.
        ("gcp-a3-mega", 8, 450.0, 200.0, 8, 25.0),
        # 8 x ConnectX-7 400 Gb/s = 3,200 Gb/s = 400 GB/s; H200 NVLink 900 / 2.
        ("gcp-a3-ultra", 8, 450.0, 400.0, 8, 50.0),
        ("azure-nd-h100-v5", 8, 450.0, 400.0, 8, 50.0),
        # 8 x HDR 200 Gb/s; A100 NVLink 600 / 2.
        ("azure-nd-a100-v4", 8, 300.0, 200.0, 8, 25.0),
        # 7 Infinity Fabric links x 64 GB/s = 448; 8 x NDR 400 Gb/s.
        ("azure-nd-mi300x-v5", 8, 448.0, 400.0, 8, 50.0),
        # 32 EFA x 100 Gb/s = 3,200 Gb/s = 400 GB/s.
        ("aws-p5", 8, 450.0, 400.0, 32, 12.5),
        # 4 EFA x 100 Gb/s = 400 Gb/s = 50 GB/s.
        ("aws-p4d", 8, 300.0, 50.0, 4, 12.5),
        # 8 GCDs; B the lowest per-GCD figure (50 GB/s); 4 x Slingshot 200 Gb/s.
        ("mi250x", 8, 50.0, 100.0, 4, 25.0),
    ],
)
def test_new_preset_figures(
    name: str,
    gpus: int,
    intra: float,
    inter: float | None,
    nics: int | None,
    nic: float | None,
) -> None:
    profile = PRESETS[name]
    assert (profile.gpus_per_node, profile.intra_gbps, profile.inter_gbps) == (
        gpus,
        intra,
        inter,
    )
    assert (profile.nics_per_node, profile.nic_gbps) == (nics, nic)
    if nics is not None and nic is not None:
        assert inter == nics * nic  # the NICs make up I
    for figure in _stated(profile):
        assert profile.source(figure), f"{name}.{figure} has no source"


def test_mesh_presets_and_the_uneven_mi250x() -> None:
    for name in ("mi300x", "azure-nd-mi300x-v5"):
        profile = PRESETS[name]
        assert (profile.intra_topology, profile.link_gbps) == ("mesh", 64.0)
        assert profile.intra_gbps == 7 * 64.0  # one link to each of the 7 peers
    mi250x = PRESETS["mi250x"]
    assert mi250x.intra_topology == "switch"  # uneven links: no faithful mesh
    assert "lowest" in mi250x.description
    assert "uneven" in mi250x.description


def test_cloud_skus_are_chosen_by_name_only() -> None:
    clouds = [n for n in PRESETS if n.split("-")[0] in ("gcp", "azure", "aws")]
    assert len(clouds) == 8
    assert all(PRESETS[n].device_pattern is None for n in clouds)
    profile, notes = resolve_profile("aws-p5")
    assert profile is PRESETS["aws-p5"]
    assert notes == []


@pytest.mark.parametrize(
    ("device", "preset"),
    [
        # Device strings from real nccl-tests / rccl-tests Rank lines.
        ("NVIDIA A100-SXM4-40GB", "a100"),
        ("NVIDIA A100-SXM4-80GB", "a100"),
        ("NVIDIA H100 80GB HBM3", "h100"),
        ("NVIDIA H800", "h800"),
        ("NVIDIA H200", "h200"),
        ("NVIDIA B200", "b200"),
        ("AMD Instinct MI300X", "mi300x"),
        ("AMD Instinct MI300X VF", "mi300x"),  # SR-IOV VM, e.g. Azure
        ("NVIDIA A100-PCIE-40GB", None),  # no NVSwitch: no preset fits
        ("NVIDIA H100 PCIe", None),
        ("NVIDIA H100 NVL", None),
        ("NVIDIA H200 NVL", None),
        ("Tesla V100-SXM2-32GB", None),
        ("", None),  # rccl-tests may print no name
        # Names not seen in a Rank line: ROCm/marketing names and made-up cases.
        ("AMD Instinct MI250X", "mi250x"),
        ("AMD Instinct MI325X", None),
        ("NVIDIA GB200", "gb200-nvl72"),
        ("NVIDIA GH200 480GB", None),
        ("Intel(R) Data Center GPU Max 1550", "aurora"),
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
    # 1600 Gb/s over the preset's 8 NICs: each NIC is taken as 25 GB/s.
    assert profile.nic_gbps == 25.0
    assert notes == [
        "profile 'h100' overridden on the command line: inter_gbps=200, nic_gbps=25"
    ]
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
        (
            "intra_gbps = ",
            "bad.toml: not valid TOML: Invalid value (at end of document)",
        ),
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


def test_a_profile_name_too_long_for_a_file_name_is_an_unknown_preset() -> None:
    # Path(name).exists() raised ENAMETOOLONG: a traceback, not ProfileError.
    with pytest.raises(ProfileError, match=r"^unknown hardware profile 'xxxx"):
        resolve_profile("x" * 300)


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("intra_gbps = true\ngpus_per_node = 8",
         "intra_gbps: expected a number or a string with a unit, got true (a boolean)"),
        ("intra_gbps = 100\ngpus_per_node = 8.5",
         "gpus_per_node: expected a whole number, got 8.5 (a float)"),
        ("intra_gbps = 100\ngpus_per_node = 0",
         "gpus_per_node: expected a whole number from 1 to 100000, got 0"),
        ('base = "h100"\nsources = 5', "sources: expected a table, got 5 (an integer)"),
        ('base = "h100"\ninter_gbps = {a=1}',
         "inter_gbps: expected a number or a string with a unit, got {'a': 1} (a "
         "table)"),
        ('base = "h100"\nhost_staging = 1',
         "host_staging: expected true or false, got 1 (an integer)"),
        ('base = "h100"\nintra_topology = "ring"',
         "intra_topology: expected one of 'switch', 'mesh', got 'ring' (a string)"),
        ('base = "h100"\nnic_derating = 0', "nic_derating: expected a number > 0 and "
         "<= 1, got 0 (an integer)"),
        ('base = "h100"\n[sources]\nintra_gbps = 3',
         "sources: intra_gbps: expected a string, got 3 (an integer)"),
    ],
)  # fmt: skip
def test_profile_values_are_type_checked(
    tmp_path: Path, text: str, message: str
) -> None:
    path = tmp_path / "bad.toml"
    path.write_text(text + "\n")
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value) == f"{path}: {message}"


def test_a_profile_that_is_not_utf8_names_file_and_line(tmp_path: Path) -> None:
    path = tmp_path / "latin1.toml"
    path.write_bytes(b'base = "h100"\n\xff\xfe = 1\n')
    with pytest.raises(ProfileError) as info:
        load_profile(path)
    assert str(info.value) == f"{path}:2: not UTF-8 text (byte 0xff)"
