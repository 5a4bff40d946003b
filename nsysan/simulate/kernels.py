"""The kernel catalogue: names as Nsight Systems stores them, launch shapes, performance profile.

Names follow a vLLM-style fp16 LLM server on A100: cuBLAS GEMMs (plain C names),
vLLM and PyTorch templates (mangled names checked with ``c++filt``; demangled text in
the nsys 2024 style: ``(int)4``, ``<unnamed>``, ``const T1 *``), a Triton MoE kernel and
NCCL 2.19+ device kernels. The profile numbers are what Nsight Compute would report for
one launch (percent of peak) and drive both the ncu CSV and the GPU-metrics samples.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

HOSTILE_NAME = "<script>alert(1)</script>"


@dataclass(frozen=True)
class Kernel:
    """One CUDA kernel: its names, launch shape and performance profile."""

    short: str
    demangled: str
    mangled: str
    grid: tuple[int, int, int]
    block: tuple[int, int, int]
    registers: int
    static_smem: int
    dynamic_smem: int
    sm_pct: float  # sm__throughput, % of peak
    mem_pct: float  # gpu__compute_memory_throughput, % of peak
    dram_pct: float  # DRAM throughput, % of peak (read share ~ 3/4)
    tensor_pct: float  # tensor pipe activity while it runs
    sm_active: float  # share of SMs holding a warp while it runs (0..1)
    clock_bound: float  # share of its run time that scales with 1 / SM clock
    nccl: bool = False


def renamed(kernel: Kernel, name: str) -> Kernel:
    """The same kernel under another name (short, demangled and mangled alike)."""
    return replace(kernel, short=name, demangled=name, mangled=name)


def _cublas(
    name: str, grid: tuple[int, int, int], sm: float, mem: float, tensor: float, clock: float
) -> Kernel:
    return Kernel(
        short=name,
        demangled=name,
        mangled=name,
        grid=grid,
        block=(256, 1, 1),
        registers=232,
        static_smem=0,
        dynamic_smem=98304,
        sm_pct=sm,
        mem_pct=mem,
        dram_pct=mem * 0.9,
        tensor_pct=tensor,
        sm_active=0.96,
        clock_bound=clock,
    )


def _nccl(short: str) -> Kernel:
    return Kernel(
        short=short,
        demangled=f"{short}(ncclDevComm *, unsigned long, ncclWork *)",
        mangled=f"_Z{len(short)}{short}P11ncclDevCommmP8ncclWork",
        grid=(16, 1, 1),
        block=(512, 1, 1),
        registers=96,
        static_smem=0,
        dynamic_smem=0,
        sm_pct=6.0,
        mem_pct=14.0,
        dram_pct=9.0,
        tensor_pct=0.0,
        sm_active=0.15,
        clock_bound=0.0,
        nccl=True,
    )


# --- dense GEMMs (cuBLAS) -------------------------------------------------------------
GEMM_LARGE = _cublas(
    "ampere_fp16_s16816gemm_fp16_256x128_ldg8_f2f_stages_64x3_tn", (32, 8, 1), 84, 46, 72, 0.9
)
GEMM_MEDIUM = _cublas(
    "ampere_fp16_s16816gemm_fp16_128x128_ldg8_f2f_stages_64x3_tn", (64, 4, 1), 76, 52, 63, 0.85
)
GEMM_LM_HEAD = _cublas(
    "ampere_fp16_s16816gemm_fp16_128x64_ldg8_f2f_stages_64x4_tn", (250, 1, 1), 70, 58, 55, 0.8
)
# Small-batch decode GEMM: streams weights, memory-bound.
GEMM_SKINNY = _cublas(
    "ampere_fp16_s16816gemm_fp16_64x64_sliced1x2_ldg8_f2f_stages_64x5_tn",
    (128, 1, 4),
    31,
    83,
    16,
    0.25,
)

# --- vLLM / PyTorch elementwise, normalization, attention ----------------------------
EMBEDDING = Kernel(
    short="indexSelectSmallIndex",
    demangled=(
        "void at::native::<unnamed>::indexSelectSmallIndex<c10::Half, long, unsigned int, "
        "(int)2, (int)2, (int)-2>(at::cuda::detail::TensorInfo<T1, T3>, "
        "at::cuda::detail::TensorInfo<T1, T3>, at::cuda::detail::TensorInfo<T2, T3>, "
        "int, int, T3, long)"
    ),
    mangled=(
        "_ZN2at6native12_GLOBAL__N_121indexSelectSmallIndexIN3c104HalfEljLi2ELi2ELin2EEEv"
        "NS_4cuda6detail10TensorInfoIT_T1_EESA_NS7_IT0_S9_EEiiS9_l"
    ),
    grid=(216, 1, 1),
    block=(128, 1, 1),
    registers=30,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=8,
    mem_pct=38,
    dram_pct=30,
    tensor_pct=0,
    sm_active=0.7,
    clock_bound=0.3,
)
RMS_NORM = Kernel(
    short="rms_norm_kernel",
    demangled=(
        "void vllm::rms_norm_kernel<c10::Half>(T1 *, const T1 *, const T1 *, float, int, int)"
    ),
    mangled="_ZN4vllm15rms_norm_kernelIN3c104HalfEEEvPT_PKS3_S6_fii",
    grid=(64, 1, 1),
    block=(1024, 1, 1),
    registers=28,
    static_smem=132,
    dynamic_smem=0,
    sm_pct=18,
    mem_pct=72,
    dram_pct=66,
    tensor_pct=0,
    sm_active=0.55,
    clock_bound=0.15,
)
FUSED_ADD_RMS_NORM = Kernel(
    short="fused_add_rms_norm_kernel",
    demangled=(
        "void vllm::fused_add_rms_norm_kernel<c10::Half>(T1 *, T1 *, const T1 *, float, int, int)"
    ),
    mangled="_ZN4vllm25fused_add_rms_norm_kernelIN3c104HalfEEEvPT_S4_PKS3_fii",
    grid=(64, 1, 1),
    block=(1024, 1, 1),
    registers=32,
    static_smem=132,
    dynamic_smem=0,
    sm_pct=22,
    mem_pct=76,
    dram_pct=70,
    tensor_pct=0,
    sm_active=0.55,
    clock_bound=0.15,
)
ROTARY = Kernel(
    short="rotary_embedding_kernel",
    demangled=(
        "void vllm::rotary_embedding_kernel<c10::Half, (bool)1>(const long *, T1 *, T1 *, "
        "const T1 *, int, long, long, int, int, int)"
    ),
    mangled="_ZN4vllm23rotary_embedding_kernelIN3c104HalfELb1EEEvPKlPT_S6_PKS5_illiii",
    grid=(64, 1, 1),
    block=(512, 1, 1),
    registers=40,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=26,
    mem_pct=64,
    dram_pct=46,
    tensor_pct=0,
    sm_active=0.5,
    clock_bound=0.3,
)
KV_CACHE_WRITE = Kernel(
    short="reshape_and_cache_kernel",
    demangled=(
        "void vllm::reshape_and_cache_kernel<c10::Half, c10::Half>(const T1 *, const T1 *, "
        "T2 *, T2 *, const long *, int, int, int, int, int)"
    ),
    mangled="_ZN4vllm24reshape_and_cache_kernelIN3c104HalfES2_EEvPKT_S5_PT0_S7_PKliiiii",
    grid=(64, 1, 1),
    block=(512, 1, 1),
    registers=26,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=12,
    mem_pct=56,
    dram_pct=50,
    tensor_pct=0,
    sm_active=0.5,
    clock_bound=0.2,
)
ATTENTION = Kernel(
    short="paged_attention_v1_kernel",
    demangled=(
        "void vllm::paged_attention_v1_kernel<c10::Half, c10::Half, (int)128, (int)16, "
        "(int)128, (bool)0>(T1 *, const T1 *, const T1 *, const T1 *, int, float, "
        "const int *, const int *, int, const float *, int, int, int)"
    ),
    mangled=(
        "_ZN4vllm25paged_attention_v1_kernelIN3c104HalfES2_Li128ELi16ELi128ELb0EEEvPT_PKS3_"
        "S6_S6_ifPKiS8_iPKfiii"
    ),
    grid=(40, 64, 1),
    block=(128, 1, 1),
    registers=64,
    static_smem=512,
    dynamic_smem=33280,
    sm_pct=24,
    mem_pct=87,
    dram_pct=84,
    tensor_pct=0,
    sm_active=0.93,
    clock_bound=0.25,
)
SILU_AND_MUL = Kernel(
    short="silu_and_mul_kernel",
    demangled="void vllm::silu_and_mul_kernel<c10::Half>(T1 *, const T1 *, int)",
    mangled="_ZN4vllm19silu_and_mul_kernelIN3c104HalfEEEvPT_PKS3_i",
    grid=(64, 1, 1),
    block=(1024, 1, 1),
    registers=24,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=20,
    mem_pct=78,
    dram_pct=74,
    tensor_pct=0,
    sm_active=0.55,
    clock_bound=0.15,
)
SOFTMAX = Kernel(
    short="cunn_SoftMaxForward",
    demangled=(
        "void at::native::<unnamed>::cunn_SoftMaxForward<(int)4, float, float, float, "
        "at::native::<unnamed>::SoftMaxForwardEpilogue>(T4 *, const T2 *, int)"
    ),
    mangled=(
        "_ZN2at6native12_GLOBAL__N_119cunn_SoftMaxForwardILi4EfffNS1_22SoftMaxForwardEpilogue"
        "EEEvPT2_PKT0_i"
    ),
    grid=(64, 1, 1),
    block=(1024, 1, 1),
    registers=38,
    static_smem=0,
    dynamic_smem=4096,
    sm_pct=31,
    mem_pct=66,
    dram_pct=60,
    tensor_pct=0,
    sm_active=0.55,
    clock_bound=0.3,
)
FILL = Kernel(
    short="vectorized_elementwise_kernel",
    demangled=(
        "void at::native::vectorized_elementwise_kernel<(int)4, at::native::FillFunctor<float>, "
        "at::detail::Array<char *, (int)1>>(int, T2, T3)"
    ),
    mangled=(
        "_ZN2at6native29vectorized_elementwise_kernelILi4ENS0_11FillFunctorIfEENS_6detail5Array"
        "IPcLi1EEEEEviT0_T1_"
    ),
    grid=(8, 1, 1),
    block=(128, 1, 1),
    registers=16,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=4,
    mem_pct=22,
    dram_pct=15,
    tensor_pct=0,
    sm_active=0.07,
    clock_bound=0.5,
)

# --- mixture of experts -----------------------------------------------------------------
MOE_ROUTER = Kernel(
    short="topkGatingSoftmax",
    demangled=(
        "void vllm::moe::topkGatingSoftmax<(int)4, (int)64, (int)4, (int)16>(const float *, "
        "const bool *, float *, int, int *, int *, int, int, int)"
    ),
    mangled="_ZN4vllm3moe17topkGatingSoftmaxILi4ELi64ELi4ELi16EEEvPKfPKbPfiPiS7_iii",
    grid=(16, 1, 1),
    block=(32, 4, 1),
    registers=48,
    static_smem=0,
    dynamic_smem=0,
    sm_pct=28,
    mem_pct=41,
    dram_pct=30,
    tensor_pct=0,
    sm_active=0.15,
    clock_bound=0.5,
)
# Triton kernels keep their plain name in all three columns.
MOE_EXPERT = Kernel(
    short="fused_moe_kernel",
    demangled="fused_moe_kernel",
    mangled="fused_moe_kernel",
    grid=(1024, 1, 1),
    block=(128, 1, 1),
    registers=168,
    static_smem=0,
    dynamic_smem=65536,
    sm_pct=72,
    mem_pct=55,
    dram_pct=48,
    tensor_pct=58,
    sm_active=0.94,
    clock_bound=0.8,
)

# --- NCCL -------------------------------------------------------------------------------
NCCL_ALLREDUCE = _nccl("ncclDevKernel_AllReduce_Sum_f16_RING_LL")
NCCL_SENDRECV = _nccl("ncclDevKernel_SendRecv")
