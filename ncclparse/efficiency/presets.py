"""The preset hardware profiles, every figure with its source.

Figures we could not source are left ``None``, never guessed. ``device_pattern`` is
what :func:`~ncclparse.efficiency.hardware.match_device` looks for in the GPU name a
log prints; cloud SKUs have none (a GPU name cannot tell an Azure ND H100 v5 from a
DGX H100), so they are chosen by name (``--profile aws-p5``).

Bandwidths are line rates per direction: vendors quote NVLink and Infinity Fabric as
bidirectional totals, halved here; NIC speeds in Gb/s are divided by 8.
"""

from __future__ import annotations

from ncclparse.efficiency.profile import HardwareProfile

_NVIDIA_NVLINK = (
    "NVIDIA {gpu} datasheet: NVLink {bidir} GB/s bidirectional per GPU, halved"
)
_CX7 = "{n} x ConnectX-7 400 Gb/s (50 GB/s) per node, {system} datasheet"
_AURORA = "Aurora oneCCL data-path projection"

# Where the figures come from (see each source string for what it says).
_H100_LINE_RATE = (
    "450 GB/s is the NVLink line rate per direction (sjeaugey, "
    "https://github.com/NVIDIA/nccl-tests/issues/212)"
)
_A100_LINE_RATE = (
    "12 NVLinks x 25 GB/s in each direction (sjeaugey, "
    "https://github.com/NVIDIA/nccl-tests/issues/149)"
)
_BASEPOD = (
    "NVIDIA DGX BasePOD RA, Core Components (8 Hopper GPUs, 4 NVSwitch, 8 x "
    "ConnectX-7 up to 400 Gb/s), https://docs.nvidia.com/dgx-basepod/reference-"
    "architecture-infrastructure-foundation-enterprise-ai/latest/core-components.html"
)
_DGX_B200 = (
    "NVIDIA DGX B200 User Guide (8 GPUs, 2 NVLink 5 switches of 14.4 TB/s, 8 x "
    "ConnectX-7 up to 400 Gb/s), "
    "https://docs.nvidia.com/dgx/dgxb200-user-guide/introduction-to-dgxb200.html"
)
_H200_MLPERF = (
    "MLCommons inference v4.1, NVIDIA H200-SXM-141GBx8 system: '18x 4th Gen NVLink, "
    "900GB/s', https://raw.githubusercontent.com/mlcommons/inference_results_v4.1/"
    "main/closed/NVIDIA/systems/H200-SXM-141GBx8_TRT_MaxQ.json"
)
_GB200_MLPERF = (
    "MLCommons inference v6.1, Crusoe GB200-NVL72 system: 4 GPUs and 4 ConnectX-7 "
    "per host, https://raw.githubusercontent.com/mlcommons/inference_results_v6.1/"
    "main/closed/Crusoe/systems/GB200-NVL72_GB200-186GB_aarch64x16_Dynamo.json"
)
_MI300X_SHEET = (
    "AMD Instinct MI300X platform data sheet, https://www.amd.com/content/dam/amd/en/"
    "documents/instinct-tech-docs/data-sheets/amd-instinct-mi300x-platform-data-"
    "sheet.pdf"
)
_RCCL_MESH = (
    "8 x MI300X, 'dedicated XGMI links in a fully-connected topology' (RCCL README, "
    "https://github.com/ROCm/rccl/pull/1270)"
)
_AZURE_A100 = (
    "Azure ND A100 v4 (8 x A100 40GB, NVLink 3.0, a 200 Gb/s HDR InfiniBand link per "
    "GPU), https://learn.microsoft.com/azure/virtual-machines/sizes/gpu-accelerated/"
    "ndasra100v4-series"
)
_AZURE_H100 = (
    "Azure ND H100 v5 (8 x H100, NVLink 4.0, a 400 Gb/s NDR InfiniBand link per GPU, "
    "3.2 Tb/s per VM), https://learn.microsoft.com/azure/virtual-machines/sizes/"
    "gpu-accelerated/ndh100v5-series"
)
_AZURE_MI300X = (
    "Azure ND MI300X v5 (8 x MI300X, Infinity Fabric 128 GB/s per link, 896 GB/s "
    "aggregate, 8 x 400 Gb/s NDR InfiniBand, one per GPU), https://learn.microsoft."
    "com/azure/virtual-machines/sizes/gpu-accelerated/ndmi300xv5-series"
)
_GCP_NET = (
    "Google Cloud, Networking and GPU machines, "
    "https://cloud.google.com/compute/docs/gpus/gpu-network-bandwidth"
)
_AWS_EFA = (
    "AWS EC2 User Guide, Maximize network bandwidth with multiple network cards "
    "(P5 example requests 32 EFA devices), "
    "https://docs.aws.amazon.com/AWSEC2/latest/UserGuide/efa-acc-inst-types.html"
)
_TORCHX_AWS = (
    "torchx AWS named resources, https://github.com/meta-pytorch/torchx/blob/main/"
    "torchx/specs/named_resources_aws.py"
)
_P4D = (
    "AWS Compute Blog, 'Amazon EC2 P4d instances deep dive': 8 x A100 40GB on "
    "NVSwitch, '400 Gbps with support for EFA and GPUDirect RDMA' "
    "(mirror https://dustinward.cloud/amazon-ec2-p4d-instances-deep-dive)"
)
_FRONTIER = (
    "OLCF Frontier User Guide, https://docs.olcf.ornl.gov/systems/"
    "frontier_user_guide.html"
)


def _sources(**figures: str) -> tuple[tuple[str, str], ...]:
    return tuple(figures.items())


PRESETS: dict[str, HardwareProfile] = {
    p.name: p
    for p in (
        HardwareProfile(
            name="a100",
            intra_link="nvlink3",
            net_link="ib",
            description="DGX/HGX A100 8-GPU, NVSwitch, 8 x HDR 200 Gb/s",
            gpus_per_node=8,
            intra_gbps=300.0,
            inter_gbps=200.0,
            nics_per_node=8,
            nic_gbps=25.0,
            device_pattern=r"\bA100\b(?!.*PCIE)",
            sources=_sources(
                gpus_per_node="8 GPUs on six NVSwitches (A100 whitepaper notes, "
                "https://jingchaozhang.github.io/A100-white-paper/); " + _AZURE_A100,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="A100 SXM4", bidir=600)
                + "; "
                + _A100_LINE_RATE,
                inter_gbps="8 x ConnectX-6 HDR 200 Gb/s (25 GB/s), DGX A100 "
                "datasheet; " + _AZURE_A100,
                nics_per_node="8 x ConnectX-6 HDR, DGX A100 datasheet; " + _AZURE_A100,
                nic_gbps="200 Gb/s HDR InfiniBand = 25 GB/s",
            ),
        ),
        HardwareProfile(
            name="h100",
            intra_link="nvlink4",
            net_link="ib",
            description="DGX/HGX H100 8-GPU, NVSwitch, 8 x NDR 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"\bH100\b(?!.*(PCIE|NVL))",
            sources=_sources(
                gpus_per_node=_BASEPOD,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                + "; "
                + _H100_LINE_RATE
                + "; the AIBooster ideal's example uses B = 450 GB/s",
                inter_gbps=_CX7.format(n=8, system="DGX H100")
                + "; 8 x 400 Gbps NICs = 400 GB/s per node; "
                + _BASEPOD,
                nics_per_node=_BASEPOD,
                nic_gbps="400 Gb/s NDR InfiniBand = 50 GB/s",
            ),
        ),
        HardwareProfile(
            name="h800",
            intra_link="nvlink4",
            net_link="ib",
            description="HGX H800 8-GPU (export H100), NVSwitch; NICs unknown",
            gpus_per_node=8,
            intra_gbps=200.0,
            device_pattern=r"\bH800\b(?!.*(PCIE|NVL))",
            sources=_sources(
                gpus_per_node="8 x 'NVIDIA H800' NVSwitch nodes in nccl-tests logs, "
                "e.g. https://github.com/NVIDIA/nccl/issues/1531",
                intra_gbps="NVLink 400 GB/s bidirectional per GPU, halved: '400GB/s "
                "is the bidirectional theoretical figure' (DeepSeek, "
                "https://github.com/deepseek-ai/DeepSeek-V3/issues/28)",
            ),
        ),
        HardwareProfile(
            name="h200",
            intra_link="nvlink4",
            net_link="ib",
            description="DGX/HGX H200 8-GPU, NVSwitch, 8 x NDR 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"\bH200\b(?!.*(PCIE|NVL))",
            sources=_sources(
                gpus_per_node=_BASEPOD,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H200 SXM", bidir=900)
                + "; "
                + _H200_MLPERF,
                inter_gbps=_CX7.format(n=8, system="DGX H200") + "; " + _BASEPOD,
                nics_per_node=_BASEPOD,
                nic_gbps="400 Gb/s NDR InfiniBand = 50 GB/s",
            ),
        ),
        HardwareProfile(
            name="b200",
            intra_link="nvlink5",
            net_link="ib",
            description="DGX/HGX B200 8-GPU, NVLink 5 switch, 8 x 400 Gb/s",
            gpus_per_node=8,
            intra_gbps=900.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            device_pattern=r"(?<![A-Za-z])B200\b",
            sources=_sources(
                gpus_per_node=_DGX_B200,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="B200", bidir=1800)
                + "; 14.4 TB/s / 8 GPUs = 1.8 TB/s, "
                + _DGX_B200,
                inter_gbps=_CX7.format(n=8, system="DGX B200") + "; " + _DGX_B200,
                nics_per_node=_DGX_B200,
                nic_gbps="400 Gb/s = 50 GB/s",
            ),
        ),
        HardwareProfile(
            name="gb200-nvl72",
            intra_link="nvlink5",
            net_link="ib",
            description="GB200 NVL72 rack: one 72-GPU NVLink domain of 18 hosts",
            gpus_per_node=72,
            hosts_per_node=18,
            intra_gbps=900.0,
            inter_gbps=3600.0,
            nics_per_node=72,
            nic_gbps=50.0,
            device_pattern=r"\bGB200\b",
            sources=_sources(
                gpus_per_node="NVIDIA GB200 NVL72 spec: 72 GPUs in one NVLink domain",
                hosts_per_node=f"72 GPUs / 4 GPUs per host; {_GB200_MLPERF}",
                intra_gbps=_NVIDIA_NVLINK.format(gpu="GB200 NVL72", bidir=1800),
                inter_gbps="one 400 Gb/s NIC per GPU (NVIDIA DGX GB200 reference "
                "design): 72 x 50 GB/s per NVLink domain",
                nics_per_node=f"one ConnectX-7 per GPU; {_GB200_MLPERF}",
                nic_gbps="400 Gb/s = 50 GB/s",
            ),
        ),
        HardwareProfile(
            name="mi300x",
            intra_link="xgmi",
            net_link="ib",
            description="AMD Instinct MI300X 8-GPU platform, Infinity Fabric mesh",
            gpus_per_node=8,
            intra_gbps=448.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            intra_topology="mesh",
            link_gbps=64.0,
            device_pattern=r"MI300X",
            sources=_sources(
                gpus_per_node=_RCCL_MESH,
                intra_topology=_RCCL_MESH,
                intra_gbps="AMD Instinct MI300X datasheet: 7 Infinity Fabric links x "
                "128 GB/s bidirectional = 896 GB/s, halved; " + _MI300X_SHEET,
                link_gbps="AMD Instinct MI300X datasheet: one 128 GB/s bidirectional "
                "Infinity Fabric link to each of the 7 peers, halved (48 GB/s "
                "effective: gilbertlee-amd, https://github.com/ROCm/rccl/issues/1210)",
                inter_gbps="NICs are the host's: 8 x 400 Gb/s NICs per node as on "
                "Azure ND MI300X v5 (the configuration we could source); override "
                "with --inter-bw for your cluster; " + _AZURE_MI300X,
                nics_per_node="one NIC per GPU as on Azure ND MI300X v5 (host-"
                "dependent); " + _AZURE_MI300X,
                nic_gbps="400 Gb/s NDR InfiniBand = 50 GB/s, as on Azure ND MI300X "
                "v5 (host-dependent)",
            ),
        ),
        HardwareProfile(
            name="mi250x",
            intra_link="xgmi",
            net_link="slingshot",
            description=(
                "Frontier-style node: 4 x MI250X = 8 GCDs, 4 x Slingshot 200 Gb/s; "
                "uneven Infinity Fabric (200 GB/s to the sibling GCD, 50-100 GB/s to "
                "the others): B = 50 GB/s, the lowest sourced per-GCD figure"
            ),
            gpus_per_node=8,
            intra_gbps=50.0,
            inter_gbps=100.0,
            nics_per_node=4,
            nic_gbps=25.0,
            device_pattern=r"MI250X",
            sources=_sources(
                gpus_per_node="8 GCDs (4 x MI250X) per node, each GCD a device; "
                + _FRONTIER,
                intra_gbps="lowest per-GCD peak: GCDs on different MI250X are linked "
                "at 50-100 GB/s (on the same MI250X, 200 GB/s in each direction); "
                + _FRONTIER
                + "; one 16-wide Infinity Fabric link at 25 GT/s = 50 GB/s, AMD "
                "Instinct MI250 microarchitecture, "
                "https://rocm.docs.amd.com/en/latest/conceptual/gpu-arch/mi250.html",
                inter_gbps="4 x HPE Slingshot 200 Gb/s (25 GB/s) = 100 GB/s node "
                "injection; " + _FRONTIER,
                nics_per_node="4 x HPE Slingshot 200 Gb/s NICs per node; " + _FRONTIER,
                nic_gbps="200 Gb/s Slingshot = 25 GB/s; " + _FRONTIER,
            ),
        ),
        HardwareProfile(
            name="aurora",
            net_link="slingshot",
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
            sources=_sources(
                gpus_per_node=f"{_AURORA}: up to 12 ranks (tiles) per node",
                intra_gbps=f"{_AURORA}: Xe-link 53 GB/s unidirectional, from the Intel "
                "Data Center GPU Max Series product brief (2023)",
                inter_gbps=f"{_AURORA}: 8 NICs x 25 GB/s theoretical",
                nics_per_node=f"{_AURORA}: 8 NICs per node",
                nic_gbps=f"{_AURORA}: 23 GB/s, the figure its tables use",
                nic_derating=f"{_AURORA}: 80 % of NIC capacity achievable",
                pcie_gbps=f"{_AURORA}: 42 GB/s used in its tables (55 best, 64 max)",
                xe_link_gbps=f"{_AURORA}: 15 GB/s, ALCF acceptance data",
                xe_links=f"Aurora node: 6 GPUs; the {_AURORA} tables imply one "
                "Xe-link per GPU engaged (R/2 for R ranks)",
                mdfi_gbps=f"{_AURORA}: 196 GB/s, ALCF acceptance data (~220 spec)",
                host_staging=f"{_AURORA}, Eq. 6: data copied to host and back over "
                "PCIe",
            ),
        ),
        HardwareProfile(
            name="gcp-a3-high",
            gpu_pattern=r"\bH100\b",
            intra_link="nvlink4",
            net_link="tcpx",
            description="Google Cloud a3-highgpu-8g: 8 x H100, NVSwitch, "
            "4 x 200 Gb/s GPU NICs (GPUDirect-TCPX)",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=100.0,
            nics_per_node=4,
            nic_gbps=25.0,
            sources=_sources(
                gpus_per_node="8 x H100 80GB; " + _GCP_NET,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                + "; "
                + _H100_LINE_RATE,
                inter_gbps="4 GPU NICs x 200 Gb/s = 800 Gb/s = 100 GB/s (the "
                "1,000 Gbps in Google's table is the whole VM's); " + _GCP_NET,
                nics_per_node="4 GPU NICs (eth1-eth4) besides the host NIC: "
                "GoogleCloudPlatform/container-engine-accelerators, "
                "gpudirect-tcpx/nccl-test-latest.yaml, https://github.com/"
                "GoogleCloudPlatform/container-engine-accelerators",
                nic_gbps="200 Gb/s = 25 GB/s: Google's A3 announcement (May 2023), "
                "custom 200 Gbps IPUs for GPU-to-GPU traffic, as reported at "
                "https://www.computernetworktopology.com/"
                "google-lanca-vms-de-supercomputador-a3 (secondary source)",
            ),
        ),
        HardwareProfile(
            name="gcp-a3-mega",
            gpu_pattern=r"\bH100\b",
            intra_link="nvlink4",
            net_link="tcpx",
            description="Google Cloud a3-megagpu-8g: 8 x H100, NVSwitch, "
            "8 x 200 Gb/s GPU NICs (GPUDirect-TCPXO)",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=200.0,
            nics_per_node=8,
            nic_gbps=25.0,
            sources=_sources(
                gpus_per_node="8 x H100 80GB; " + _GCP_NET,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                + "; "
                + _H100_LINE_RATE,
                inter_gbps="8 GPU NICs x 200 Gb/s = 1,600 Gb/s = 200 GB/s ('up to "
                "1,600 Gbps' in one version of " + _GCP_NET + ")",
                nics_per_node="'8 GPU NICs per a3-megagpu-8g', NVIDIA AI Cluster "
                "Runtime, https://docs.nvidia.com/aicr/latest/integrator-guide/"
                "gke-tcpxo-networking.md; container-engine-accelerators "
                "gpudirect-tcpxo/nccl-test-latest.yaml (eth1-eth8)",
                nic_gbps="'GPUDirect-TCPXO on a3-megagpu-8g: up to 200 Gbps per "
                "secondary NIC', quoting https://docs.cloud.google.com/vertex-ai/"
                "docs/training/configure-compute = 25 GB/s",
            ),
        ),
        HardwareProfile(
            name="gcp-a3-ultra",
            gpu_pattern=r"\bH200\b",
            intra_link="nvlink4",
            net_link="roce",
            description="Google Cloud a3-ultragpu-8g: 8 x H200, NVSwitch, "
            "8 x ConnectX-7 400 Gb/s (RoCE, GPUDirect RDMA)",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            sources=_sources(
                gpus_per_node="8 x H200 141GB; " + _GCP_NET,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H200 SXM", bidir=900)
                + "; "
                + _H200_MLPERF,
                inter_gbps="'The eight CX7 NICs deliver a total network bandwidth of "
                "3,200 Gbps' = 400 GB/s; " + _GCP_NET,
                nics_per_node="8 x ConnectX-7, 'each CX7 NIC is aligned with one "
                "NVIDIA H200 141GB GPU'; " + _GCP_NET,
                nic_gbps="3,200 Gbps / 8 CX7 NICs = 400 Gb/s = 50 GB/s; " + _GCP_NET,
            ),
        ),
        HardwareProfile(
            name="azure-nd-h100-v5",
            gpu_pattern=r"\bH100\b",
            intra_link="nvlink4",
            net_link="ib",
            description="Azure Standard_ND96isr_H100_v5: 8 x H100, NVLink 4.0, "
            "8 x NDR 400 Gb/s InfiniBand",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            sources=_sources(
                gpus_per_node=_AZURE_H100,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                + "; "
                + _H100_LINE_RATE
                + "; "
                + _AZURE_H100,
                inter_gbps="8 x 400 Gb/s = 3.2 Tb/s = 400 GB/s; " + _AZURE_H100,
                nics_per_node=_AZURE_H100,
                nic_gbps="400 Gb/s NDR InfiniBand = 50 GB/s; " + _AZURE_H100,
            ),
        ),
        HardwareProfile(
            name="azure-nd-a100-v4",
            gpu_pattern=r"\bA100\b",
            intra_link="nvlink3",
            net_link="ib",
            description="Azure Standard_ND96asr_v4: 8 x A100 40GB, NVLink 3.0, "
            "8 x HDR 200 Gb/s InfiniBand",
            gpus_per_node=8,
            intra_gbps=300.0,
            inter_gbps=200.0,
            nics_per_node=8,
            nic_gbps=25.0,
            sources=_sources(
                gpus_per_node=_AZURE_A100,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="A100 SXM4", bidir=600)
                + "; "
                + _A100_LINE_RATE
                + "; "
                + _AZURE_A100,
                inter_gbps="8 x 200 Gb/s = 1.6 Tb/s = 200 GB/s (the page's "
                "'200 GB/s' per link is a typo for Gb/s); " + _AZURE_A100,
                nics_per_node=_AZURE_A100,
                nic_gbps="200 Gb/s HDR InfiniBand = 25 GB/s; " + _AZURE_A100,
            ),
        ),
        HardwareProfile(
            name="azure-nd-mi300x-v5",
            gpu_pattern=r"MI300X",
            intra_link="xgmi",
            net_link="ib",
            description="Azure Standard_ND96isr_MI300X_v5: 8 x MI300X, Infinity "
            "Fabric mesh, 8 x NDR 400 Gb/s InfiniBand",
            gpus_per_node=8,
            intra_gbps=448.0,
            inter_gbps=400.0,
            nics_per_node=8,
            nic_gbps=50.0,
            intra_topology="mesh",
            link_gbps=64.0,
            sources=_sources(
                gpus_per_node=_AZURE_MI300X,
                intra_topology=_RCCL_MESH,
                intra_gbps="7 links x 128 GB/s = 896 GB/s bidirectional, halved; "
                + _AZURE_MI300X,
                link_gbps="128 GB/s bidirectional per Infinity Fabric link, halved; "
                + _AZURE_MI300X,
                inter_gbps="8 x 400 Gb/s = 400 GB/s; " + _AZURE_MI300X,
                nics_per_node=_AZURE_MI300X,
                nic_gbps="400 Gb/s NDR InfiniBand = 50 GB/s; " + _AZURE_MI300X,
            ),
        ),
        HardwareProfile(
            name="aws-p5",
            gpu_pattern=r"\bH100\b",
            intra_link="nvlink4",
            net_link="efa",
            description="AWS p5.48xlarge: 8 x H100, NVSwitch, 32 x 100 Gb/s EFA "
            "(3,200 Gb/s, GPUDirect RDMA)",
            gpus_per_node=8,
            intra_gbps=450.0,
            inter_gbps=400.0,
            nics_per_node=32,
            nic_gbps=12.5,
            sources=_sources(
                gpus_per_node=f"8 x H100 on NVSwitch; {_TORCHX_AWS} "
                "(aws_p5_48xlarge: gpu=8)",
                intra_gbps=_NVIDIA_NVLINK.format(gpu="H100 SXM5", bidir=900)
                + "; "
                + _H100_LINE_RATE,
                inter_gbps="32 EFA x 100 Gb/s = 3,200 Gb/s = 400 GB/s; " + _AWS_EFA,
                nics_per_node=f"32 EFA devices; {_AWS_EFA}; {_TORCHX_AWS} "
                "(EFA_DEVICE: 32)",
                nic_gbps="100 Gb/s per EFA card, four per GPU (Perplexity, "
                "https://www.perplexity.ai/hub/blog/high-performance-gpu-memory-"
                "transfer-on-aws) = 12.5 GB/s",
            ),
        ),
        HardwareProfile(
            name="aws-p4d",
            gpu_pattern=r"\bA100\b",
            intra_link="nvlink3",
            net_link="efa",
            description="AWS p4d.24xlarge: 8 x A100 40GB, NVSwitch, 4 x 100 Gb/s "
            "EFA (400 Gb/s, GPUDirect RDMA)",
            gpus_per_node=8,
            intra_gbps=300.0,
            inter_gbps=50.0,
            nics_per_node=4,
            nic_gbps=12.5,
            sources=_sources(
                gpus_per_node=_P4D,
                intra_gbps=_NVIDIA_NVLINK.format(gpu="A100 SXM4", bidir=600)
                + "; "
                + _A100_LINE_RATE,
                inter_gbps="400 Gb/s = 50 GB/s; " + _P4D,
                nics_per_node=f"4 EFA devices; {_TORCHX_AWS} "
                "(aws_p4d_24xlarge: EFA_DEVICE: 4)",
                nic_gbps="400 Gb/s over 4 EFA devices = 100 Gb/s = 12.5 GB/s each "
                "(derived from the two sources above)",
            ),
        ),
    )
}
