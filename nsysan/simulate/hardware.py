"""The simulated node: A100 GPUs as TARGET_INFO_GPU lists them, and the host's properties."""

from __future__ import annotations

import random
import uuid
from dataclasses import dataclass

from nsysan.simulate import schema
from nsysan.simulate.trace import Row

HOSTNAME = "nsysan-sim-node0"
A100_BOOST_CLOCK_HZ = 1_410_000_000
A100_IDLE_CLOCK_HZ = 210_000_000
# PCI bus locations of the GPUs of an HGX A100 8-GPU baseboard, in CUDA order.
HGX_BUS_LOCATIONS = (
    "0000:07:00.0",
    "0000:0f:00.0",
    "0000:47:00.0",
    "0000:4e:00.0",
    "0000:87:00.0",
    "0000:90:00.0",
    "0000:b7:00.0",
    "0000:bd:00.0",
)


@dataclass(frozen=True)
class GpuModel:
    """Device properties shared by every GPU of one model."""

    name: str
    total_memory: int
    memory_bandwidth: int  # B/s
    sm_count: int = 108
    l2_cache: int = 41_943_040


A100_SXM = GpuModel("NVIDIA A100-SXM4-80GB", 85_051_572_224, 2_039_000_000_000)
A100_PCIE = GpuModel("NVIDIA A100 80GB PCIe", 85_174_583_296, 1_935_360_000_000)


@dataclass(frozen=True)
class Gpu:
    """One physical GPU of the node."""

    index: int  # TARGET_INFO_GPU.id == cuDevice
    uuid: str
    bus: str
    model: GpuModel


def make_gpus(model: GpuModel, count: int, rng: random.Random) -> tuple[Gpu, ...]:
    """``count`` GPUs with distinct, seeded UUIDs and HGX bus locations."""
    return tuple(
        Gpu(i, str(uuid.UUID(int=rng.getrandbits(128), version=4)), HGX_BUS_LOCATIONS[i], model)
        for i in range(count)
    )


def target_info_gpu_row(gpu: Gpu) -> Row:
    """The TARGET_INFO_GPU row of ``gpu`` (GA100, compute capability 8.0)."""
    m = gpu.model
    return (
        schema.GLOBAL_VID, gpu.index, m.name, gpu.bus, 1, m.l2_cache, m.total_memory,
        m.memory_bandwidth, A100_BOOST_CLOCK_HZ, m.sm_count, gpu.index, gpu.uuid, 0, "GA100",
        gpu.index, "", "", 161, 0, 65536, 4, 65536, 49152, 166912, 167936, 65536, 32, 3, 64, 32,
        1024, 1024, 1024, 64, 2147483647, 65535, 65535, 8, 0, 8, 0,
    )  # fmt: skip


# (name, nameEnum, value) of TARGET_INFO_SYSTEM_ENV; nameEnum values as real exports use.
SYSTEM_ENV: tuple[tuple[str, int, str], ...] = (
    ("CpuCores", 1, "64"),
    ("CpuArchitecture", 3, "x86_64"),
    ("CpuDescription", 13, "AMD EPYC 7742 64-Core Processor"),
    ("TargetInstallDir", 170, "/opt/nvidia/nsight-systems/2024.2.3/target-linux-x64"),
    ("NvDriverVersion", 205, "535.104.05"),
    ("OsDescription", 605, "Ubuntu 22.04.3 LTS"),
    ("CudaDriverVersion", 611, "12020"),
    ("Hostname", 619, HOSTNAME),
)


def system_env_rows(cpu_cores: int | None = None) -> list[Row]:
    """The node's TARGET_INFO_SYSTEM_ENV rows; ``cpu_cores`` replaces the default CpuCores."""
    return [
        (
            schema.GLOBAL_VID,
            "Local (CLI)",
            n,
            e,
            str(cpu_cores) if n == "CpuCores" and cpu_cores else v,
        )
        for n, e, v in SYSTEM_ENV
    ]
