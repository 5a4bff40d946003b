"""The export schema the generator writes: a subset of Nsight Systems 2024.2.3.38 (schema 3.11.1).

The DDL below is the ``CREATE TABLE`` text of real 2024.2.3.38 exports (read from
``sqlite_master``), with the per-column comments left out. Only tables the generator
fills are created, as a lazy export would (empty tables are left out). Enum rows are
the values of the same export version, limited to the enums the generated rows use.
"""

from __future__ import annotations

EXPORT_PRODUCT_VERSION = "2024.2.3.38"
EXPORT_SCHEMA_VERSION = "3.11.1"
# Marks the file as synthetic for anyone who reads the metadata.
EXPORT_PRODUCT_NAME = "nsysan.simulate (NVIDIA Nsight Systems 2024.2.3 export schema)"
EXPORT_HOST = "nsysan-simulate"

VM_ID = 1
GLOBAL_VID = VM_ID << 48

# ENUM_NSYS_EVENT_TYPE
NVTX_PUSH_POP = 59
NVTX_START_END = 60
# ENUM_NSYS_EVENT_CLASS
CLASS_CUDA_RUNTIME = 0
CLASS_OSRT = 27
# ENUM_CUDA_MEMCPY_OPER / ENUM_CUDA_MEM_KIND
MEMCPY_HTOD = 1
MEMCPY_DTOH = 2
MEM_PAGEABLE = 0
MEM_PINNED = 1
MEM_DEVICE = 2
MEMORY_ALLOC = 0  # CUDA_GPU_MEMORY_USAGE_EVENTS.memoryOperationType
MEMORY_FREE = 1
LAUNCH_REGULAR = 1
CACHE_PREFER_NONE = 0
SHMEM_LIMIT_DEFAULT = 0

ENUM_ROWS: dict[str, tuple[tuple[int, str, str], ...]] = {
    "ENUM_NSYS_EVENT_TYPE": (
        (34, "NvtxMark", "NvtxMark"),
        (39, "NvtxThread", "NvtxThread"),
        (59, "NvtxPushPopRange", "NvtxPushPopRange"),
        (60, "NvtxStartEndRange", "NvtxStartEndRange"),
        (75, "NvtxDomainCreate", "NvtxDomainCreate"),
    ),
    "ENUM_NSYS_EVENT_CLASS": (
        (0, "TRACE_PROCESS_EVENT_CUDA_RUNTIME", "CUDA runtime"),
        (1, "TRACE_PROCESS_EVENT_CUDA_DRIVER", "CUDA driver"),
        (27, "TRACE_PROCESS_EVENT_OS_RUNTIME", "OSRT runtime"),
    ),
    "ENUM_CUDA_MEMCPY_OPER": (
        (0, "CUDA_MEMCPY_KIND_UNKNOWN", "Unknown"),
        (1, "CUDA_MEMCPY_KIND_HTOD", "Host-to-Device"),
        (2, "CUDA_MEMCPY_KIND_DTOH", "Device-to-Host"),
        (3, "CUDA_MEMCPY_KIND_HTOA", "Host-to-Array"),
        (4, "CUDA_MEMCPY_KIND_ATOH", "Array-to-Host"),
        (5, "CUDA_MEMCPY_KIND_ATOA", "Array-to-Array"),
        (6, "CUDA_MEMCPY_KIND_ATOD", "Array-to-Device"),
        (7, "CUDA_MEMCPY_KIND_DTOA", "Device-to-Array"),
        (8, "CUDA_MEMCPY_KIND_DTOD", "Device-to-Device"),
        (9, "CUDA_MEMCPY_KIND_HTOH", "Host-to-Host"),
        (10, "CUDA_MEMCPY_KIND_PTOP", "Peer-to-Peer"),
        (11, "CUDA_MEMCPY_KIND_UVM_HTOD", "Unified Host-to-Device"),
        (12, "CUDA_MEMCPY_KIND_UVM_DTOH", "Unified Device-to-Host"),
        (13, "CUDA_MEMCPY_KIND_UVM_DTOD", "Unified Device-to-Device"),
    ),
    "ENUM_CUDA_MEM_KIND": (
        (0, "CUDA_MEMOPR_MEMORY_KIND_PAGEABLE", "Pageable"),
        (1, "CUDA_MEMOPR_MEMORY_KIND_PINNED", "Pinned"),
        (2, "CUDA_MEMOPR_MEMORY_KIND_DEVICE", "Device"),
        (3, "CUDA_MEMOPR_MEMORY_KIND_ARRAY", "Array"),
        (4, "CUDA_MEMOPR_MEMORY_KIND_MANAGED", "Managed"),
        (5, "CUDA_MEMOPR_MEMORY_KIND_DEVICE_STATIC", "Device Static"),
        (6, "CUDA_MEMOPR_MEMORY_KIND_MANAGED_STATIC", "Managed Static"),
        (7, "CUDA_MEMOPR_MEMORY_KIND_UNKNOWN", "Unknown"),
    ),
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": (
        (0, "CUDA_KERNEL_LAUNCH_TYPE_UNKNOWN", "Unknown"),
        (1, "CUDA_KERNEL_LAUNCH_TYPE_REGULAR", "Regular"),
        (2, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_SINGLE_DEVICE", "Coop Single Device"),
        (3, "CUDA_KERNEL_LAUNCH_TYPE_COOPERATIVE_MULTI_DEVICE", "Coop Multi Device"),
    ),
    "ENUM_CUDA_FUNC_CACHE_CONFIG": (
        (0, "CU_FUNC_CACHE_PREFER_NONE", "None"),
        (1, "CU_FUNC_CACHE_PREFER_SHARED", "Shared"),
        (2, "CU_FUNC_CACHE_PREFER_L1", "L1"),
        (3, "CU_FUNC_CACHE_PREFER_EQUAL", "Equal"),
    ),
    "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG": (
        (0, "CUDA_SHARED_MEM_LIMIT_DEFAULT", "Default"),
        (1, "CUDA_SHARED_MEM_LIMIT_OPTIN", "Opt in"),
    ),
}

# GA100 GPU-metrics set, in the metricId order of a real 2024.2.3 export. Throughput
# and activity metrics are integer percent of peak; clocks are integer Hz.
GPU_METRIC_NAMES: tuple[str, ...] = (
    "PCIe TX Throughput",
    "GPC Clock Frequency",
    "Unallocated Warps in Active SMs",
    "SYS Clock Frequency",
    "DRAM Read Throughput",
    "GR Active",
    "DRAM Write Throughput",
    "SM Active",
    "PCIe RX Throughput",
    "SM Issue",
    "Tensor Active",
    "Vertex/Tess/Geometry Warps in Flight",
    "Pixel Warps in Flight",
    "Compute Warps in Flight",
)
# typeId of one GPU's metrics: the GPU's TARGET_INFO_GPU.id in the low byte (the
# convention of a real single-GPU export, (1 << 48) | (1 << 32) for GPU 0).
GPU_METRICS_TYPE_BASE = (VM_ID << 48) | (1 << 32)

# Table name -> DDL, in creation order.
DDL: dict[str, str] = {
    "META_DATA_EXPORT": """\
CREATE TABLE META_DATA_EXPORT (
    name                    TEXT    NOT NULL,
    value                   TEXT
)""",
    "StringIds": """\
CREATE TABLE StringIds (
    id                      INTEGER NOT NULL PRIMARY KEY,
    value                   TEXT    NOT NULL
)""",
    "ThreadNames": """\
CREATE TABLE ThreadNames (
    nameId                  INTEGER NOT NULL,
    priority                INTEGER,
    globalTid               INTEGER
)""",
    "PROCESSES": """\
CREATE TABLE PROCESSES (
    globalPid               INTEGER,
    pid                     INTEGER,
    name                    TEXT
)""",
    "TARGET_INFO_SESSION_START_TIME": """\
CREATE TABLE TARGET_INFO_SESSION_START_TIME (
    utcEpochNs              INTEGER,
    utcTime                 TEXT,
    localTime               TEXT
)""",
    "TARGET_INFO_SYSTEM_ENV": """\
CREATE TABLE TARGET_INFO_SYSTEM_ENV (
    globalVid               INTEGER,
    devStateName            TEXT    NOT NULL,
    name                    TEXT    NOT NULL,
    nameEnum                INTEGER NOT NULL,
    value                   TEXT    NOT NULL
)""",
    "ANALYSIS_DETAILS": """\
CREATE TABLE ANALYSIS_DETAILS (
    globalVid               INTEGER NOT NULL,
    duration                INTEGER NOT NULL,
    startTime               INTEGER NOT NULL,
    stopTime                INTEGER NOT NULL
)""",
    "TARGET_INFO_GPU": """\
CREATE TABLE TARGET_INFO_GPU (
    vmId                    INTEGER NOT NULL,
    id                      INTEGER NOT NULL,
    name                    TEXT,
    busLocation             TEXT,
    isDiscrete              INTEGER,
    l2CacheSize             INTEGER,
    totalMemory             INTEGER,
    memoryBandwidth         INTEGER,
    clockRate               INTEGER,
    smCount                 INTEGER,
    pwGpuId                 INTEGER,
    uuid                    TEXT,
    luid                    INTEGER,
    chipName                TEXT,
    cuDevice                INTEGER,
    ctxswDevPath            TEXT,
    ctrlDevPath             TEXT,
    revision                INTEGER,
    nodeMask                INTEGER,
    constantMemory          INTEGER,
    maxIPC                  INTEGER,
    maxRegistersPerBlock    INTEGER,
    maxShmemPerBlock        INTEGER,
    maxShmemPerBlockOptin   INTEGER,
    maxShmemPerSm           INTEGER,
    maxRegistersPerSm       INTEGER,
    threadsPerWarp          INTEGER,
    asyncEngines            INTEGER,
    maxWarpsPerSm           INTEGER,
    maxBlocksPerSm          INTEGER,
    maxThreadsPerBlock      INTEGER,
    maxBlockDimX            INTEGER,
    maxBlockDimY            INTEGER,
    maxBlockDimZ            INTEGER,
    maxGridDimX             INTEGER,
    maxGridDimY             INTEGER,
    maxGridDimZ             INTEGER,
    computeMajor            INTEGER,
    computeMinor            INTEGER,
    smMajor                 INTEGER,
    smMinor                 INTEGER
)""",
    "CUPTI_ACTIVITY_KIND_KERNEL": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_KERNEL (
    start                   INTEGER NOT NULL,
    end                     INTEGER NOT NULL,
    deviceId                INTEGER NOT NULL,
    contextId               INTEGER NOT NULL,
    greenContextId          INTEGER,
    streamId                INTEGER NOT NULL,
    correlationId           INTEGER,
    globalPid               INTEGER,
    demangledName           INTEGER NOT NULL,
    shortName               INTEGER NOT NULL,
    mangledName             INTEGER,
    launchType              INTEGER,
    cacheConfig             INTEGER,
    registersPerThread      INTEGER NOT NULL,
    gridX                   INTEGER NOT NULL,
    gridY                   INTEGER NOT NULL,
    gridZ                   INTEGER NOT NULL,
    blockX                  INTEGER NOT NULL,
    blockY                  INTEGER NOT NULL,
    blockZ                  INTEGER NOT NULL,
    staticSharedMemory      INTEGER NOT NULL,
    dynamicSharedMemory     INTEGER NOT NULL,
    localMemoryPerThread    INTEGER NOT NULL,
    localMemoryTotal        INTEGER NOT NULL,
    gridId                  INTEGER NOT NULL,
    sharedMemoryExecuted    INTEGER,
    graphNodeId             INTEGER,
    sharedMemoryLimitConfig INTEGER
)""",
    # Not in the 2024.2 exports we hold (none used CUDA graphs): the columns of a
    # graph-level capture as NVIDIA documents them (GRAPH_TRACE_DOC in tests/test_simulate.py).
    "CUPTI_ACTIVITY_KIND_GRAPH_TRACE": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_GRAPH_TRACE (
    start                   INTEGER NOT NULL,
    end                     INTEGER NOT NULL,
    deviceId                INTEGER NOT NULL,
    contextId               INTEGER NOT NULL,
    greenContextId          INTEGER,
    streamId                INTEGER NOT NULL,
    correlationId           INTEGER,
    globalPid               INTEGER,
    graphId                 INTEGER NOT NULL,
    graphExecId             INTEGER NOT NULL
)""",
    "CUPTI_ACTIVITY_KIND_RUNTIME": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_RUNTIME (
    start                   INTEGER NOT NULL,
    end                     INTEGER NOT NULL,
    eventClass              INTEGER NOT NULL,
    globalTid               INTEGER,
    correlationId           INTEGER,
    nameId                  INTEGER NOT NULL,
    returnValue             INTEGER NOT NULL,
    callchainId             INTEGER
)""",
    "CUPTI_ACTIVITY_KIND_MEMCPY": """\
CREATE TABLE CUPTI_ACTIVITY_KIND_MEMCPY (
    start                   INTEGER NOT NULL,
    end                     INTEGER NOT NULL,
    deviceId                INTEGER NOT NULL,
    contextId               INTEGER NOT NULL,
    greenContextId          INTEGER,
    streamId                INTEGER NOT NULL,
    correlationId           INTEGER,
    globalPid               INTEGER,
    bytes                   INTEGER NOT NULL,
    copyKind                INTEGER NOT NULL,
    deprecatedSrcId         INTEGER,
    srcKind                 INTEGER,
    dstKind                 INTEGER,
    srcDeviceId             INTEGER,
    srcContextId            INTEGER,
    dstDeviceId             INTEGER,
    dstContextId            INTEGER,
    migrationCause          INTEGER,
    graphNodeId             INTEGER,
    virtualAddress          INTEGER
)""",
    "NVTX_EVENTS": """\
CREATE TABLE NVTX_EVENTS (
    start                   INTEGER NOT NULL,
    end                     INTEGER,
    eventType               INTEGER NOT NULL,
    rangeId                 INTEGER,
    category                INTEGER,
    color                   INTEGER,
    text                    TEXT,
    globalTid               INTEGER,
    endGlobalTid            INTEGER,
    textId                  INTEGER,
    domainId                INTEGER,
    uint64Value             INTEGER,
    int64Value              INTEGER,
    doubleValue             REAL,
    uint32Value             INTEGER,
    int32Value              INTEGER,
    floatValue              REAL,
    jsonTextId              INTEGER,
    jsonText                TEXT
)""",
    "OSRT_API": """\
CREATE TABLE OSRT_API (
    start                   INTEGER NOT NULL,
    end                     INTEGER NOT NULL,
    eventClass              INTEGER NOT NULL,
    globalTid               INTEGER,
    nameId                  INTEGER NOT NULL,
    returnValue             INTEGER NOT NULL,
    nestingLevel            INTEGER,
    callchainId             INTEGER NOT NULL
)""",
    "OSRT_CALLCHAINS": """\
CREATE TABLE OSRT_CALLCHAINS (
    id                      INTEGER NOT NULL,
    symbol                  INTEGER NOT NULL,
    module                  INTEGER NOT NULL,
    kernelMode              INTEGER,
    thumbCode               INTEGER,
    unresolved              INTEGER,
    specialEntry            INTEGER,
    originalIP              INTEGER,
    unwindMethod            INTEGER,
    stackDepth              INTEGER NOT NULL,
    PRIMARY KEY (id, stackDepth)
)""",
    "GPU_METRICS": """\
CREATE TABLE GPU_METRICS (
    timestamp               INTEGER,
    typeId                  INTEGER NOT NULL,
    metricId                INTEGER NOT NULL,
    value                   INTEGER NOT NULL
)""",
    "TARGET_INFO_GPU_METRICS": """\
CREATE TABLE TARGET_INFO_GPU_METRICS (
    typeId                  INTEGER NOT NULL,
    sourceId                INTEGER NOT NULL,
    typeName                TEXT    NOT NULL,
    metricId                INTEGER NOT NULL,
    metricName              TEXT    NOT NULL
)""",
    "ENUM_NSYS_EVENT_TYPE": """\
CREATE TABLE ENUM_NSYS_EVENT_TYPE (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_NSYS_EVENT_CLASS": """\
CREATE TABLE ENUM_NSYS_EVENT_CLASS (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_CUDA_MEMCPY_OPER": """\
CREATE TABLE ENUM_CUDA_MEMCPY_OPER (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_CUDA_MEM_KIND": """\
CREATE TABLE ENUM_CUDA_MEM_KIND (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_CUDA_KERNEL_LAUNCH_TYPE": """\
CREATE TABLE ENUM_CUDA_KERNEL_LAUNCH_TYPE (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_CUDA_FUNC_CACHE_CONFIG": """\
CREATE TABLE ENUM_CUDA_FUNC_CACHE_CONFIG (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    "ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG": """\
CREATE TABLE ENUM_CUDA_SHARED_MEM_LIMIT_CONFIG (
    id                      INTEGER NOT NULL PRIMARY KEY,
    name                    TEXT,
    label                   TEXT
)""",
    # Columns as in the 2022.2 export T002 (no 2024.2 export in the shared traces has it).
    "CUDA_GPU_MEMORY_USAGE_EVENTS": """\
CREATE TABLE CUDA_GPU_MEMORY_USAGE_EVENTS (
    start                   INTEGER NOT NULL,
    globalPid               INTEGER NOT NULL,
    deviceId                INTEGER NOT NULL,
    contextId               INTEGER NOT NULL,
    address                 INTEGER NOT NULL,
    pc                      INTEGER NOT NULL,
    bytes                   INTEGER NOT NULL,
    memKind                 INTEGER NOT NULL,
    memoryOperationType     INTEGER NOT NULL,
    name                    TEXT,
    correlationId           INTEGER
)""",
    "SCHED_EVENTS": """\
CREATE TABLE SCHED_EVENTS (
    start                   INTEGER NOT NULL,
    cpu                     INTEGER NOT NULL,
    isSchedIn               INTEGER NOT NULL,
    globalTid               INTEGER
)""",
}


def columns(table: str) -> tuple[str, ...]:
    """Column names of ``table``, in DDL order."""
    body = DDL[table].split("(", 1)[1].rsplit(")", 1)[0]
    names = []
    for line in body.splitlines():
        words = line.split()
        if words and words[0] != "PRIMARY":
            names.append(words[0])
    return tuple(names)


def insert_sql(table: str) -> str:
    """``INSERT`` statement with one placeholder per column of ``table``."""
    marks = ", ".join("?" * len(columns(table)))
    return f"INSERT INTO {table} VALUES ({marks})"
