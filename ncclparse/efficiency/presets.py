"""The preset hardware profiles, every figure with its source.

Figures we could not source are left ``None``, never guessed. ``device_pattern`` is
what :func:`~ncclparse.efficiency.hardware.match_device` looks for in the GPU name a
log prints.
"""

from __future__ import annotations

from ncclparse.efficiency.profile import HardwareProfile

_NVIDIA_NVLINK = (
    "NVIDIA {gpu} datasheet: NVLink {bidir} GB/s bidirectional per GPU, halved"
)
_CX7 = "{n} x ConnectX-7 400 Gb/s (50 GB/s) per node, {system} datasheet"
_AURORA = "Aurora oneCCL data-path projection"

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
                    + "; the AIBooster ideal's example uses B = 450 GB/s",
                ),
                (
                    "inter_gbps",
                    _CX7.format(n=8, system="DGX H100")
                    + "; 8 x 400 Gbps NICs = 400 GB/s per node",
                ),
                ("nic_gbps", "400 Gb/s NDR InfiniBand = 50 GB/s"),
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
                ("gpus_per_node", f"{_AURORA}: up to 12 ranks (tiles) per node"),
                (
                    "intra_gbps",
                    f"{_AURORA}: Xe-link 53 GB/s unidirectional, from the Intel Data "
                    "Center GPU Max Series product brief (2023)",
                ),
                ("inter_gbps", f"{_AURORA}: 8 NICs x 25 GB/s theoretical"),
                ("nic_gbps", f"{_AURORA}: 23 GB/s, the figure its tables use"),
                ("nic_derating", f"{_AURORA}: 80 % of NIC capacity achievable"),
                (
                    "pcie_gbps",
                    f"{_AURORA}: 42 GB/s used in its tables (55 best, 64 max)",
                ),
                ("xe_link_gbps", f"{_AURORA}: 15 GB/s, ALCF acceptance data"),
                (
                    "xe_links",
                    f"Aurora node: 6 GPUs; the {_AURORA} tables imply one Xe-link "
                    "per GPU engaged (R/2 for R ranks)",
                ),
                (
                    "mdfi_gbps",
                    f"{_AURORA}: 196 GB/s, ALCF acceptance data (~220 spec)",
                ),
                (
                    "host_staging",
                    f"{_AURORA}, Eq. 6: data copied to host and back over PCIe",
                ),
            ),
        ),
    )
}
