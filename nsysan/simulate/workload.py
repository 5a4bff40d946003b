"""What one decode step of an fp16 Llama-style model launches, with base kernel durations.

A real step launches ~10 kernels per transformer layer for dozens of layers; to keep
files small each simulated *layer group* stands for several layers, so a step is
``1 + 10 * layers + 4`` kernels (plus two all-reduces per layer group under tensor
parallelism). Durations are for the reference step of ~32.5 ms used by the case study;
scenarios rescale them.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from typing import Literal

from nsysan.simulate import kernels as k

Part = Literal["attn", "mlp", "norm", "io", "expert", "router", "comm"]


@dataclass(frozen=True)
class Op:
    """One launch of a step: which kernel, how long it runs at base speed, what it is part of."""

    kernel: k.Kernel
    us: float
    part: Part


ALLREDUCE = Op(k.NCCL_ALLREDUCE, 0.0, "comm")
ALL_TO_ALL = Op(k.NCCL_SENDRECV, 0.0, "comm")

ATTENTION_OPS = (
    Op(k.GEMM_LARGE, 3000, "attn"),  # QKV projection
    Op(k.ROTARY, 250, "attn"),
    Op(k.KV_CACHE_WRITE, 200, "attn"),
    Op(k.ATTENTION, 3300, "attn"),
    Op(k.GEMM_MEDIUM, 1500, "attn"),  # output projection
)
MLP_OPS = (
    Op(k.GEMM_LARGE, 3700, "mlp"),  # gate/up projection
    Op(k.SILU_AND_MUL, 350, "mlp"),
    Op(k.GEMM_MEDIUM, 1900, "mlp"),  # down projection
)
PRE_OPS = (Op(k.EMBEDDING, 60, "io"),)
POST_OPS = (
    Op(k.RMS_NORM, 180, "norm"),
    Op(k.GEMM_LM_HEAD, 2600, "io"),
    Op(k.SOFTMAX, 550, "io"),
    Op(k.FILL, 40, "io"),
)
NORM_US = 180
EXPERT_OPS = (
    Op(k.MOE_EXPERT, 2400, "expert"),  # w13 (gate/up) of the local experts
    Op(k.SILU_AND_MUL, 250, "expert"),
    Op(k.MOE_EXPERT, 1300, "expert"),  # w2 (down)
)


def decode_step(layers: int, *, tensor_parallel: bool = False, moe: bool = False) -> list[Op]:
    """The launches of one decode step, in order."""
    ops = list(PRE_OPS)
    for layer in range(layers):
        first = layer == 0
        ops.append(Op(k.RMS_NORM if first else k.FUSED_ADD_RMS_NORM, NORM_US, "norm"))
        ops.extend(ATTENTION_OPS)
        if tensor_parallel:
            ops.append(ALLREDUCE)
        ops.append(Op(k.FUSED_ADD_RMS_NORM, NORM_US, "norm"))
        if moe:
            ops.append(Op(k.MOE_ROUTER, 120, "router"))
            ops.append(ALL_TO_ALL)
            ops.extend(EXPERT_OPS)
            ops.append(ALL_TO_ALL)
        else:
            ops.extend(MLP_OPS)
            if tensor_parallel:
                ops.append(ALLREDUCE)
    ops.extend(POST_OPS)
    return ops


def compute_us(ops: Iterable[Op]) -> float:
    """Base GPU time of the non-communication launches."""
    return sum(op.us for op in ops if op.part != "comm")


def rescaled(ops: Iterable[Op], factor: float, parts: tuple[Part, ...] | None = None) -> list[Op]:
    """``ops`` with the durations of ``parts`` (all parts when None) multiplied by ``factor``."""
    return [
        replace(op, us=op.us * factor) if parts is None or op.part in parts else op for op in ops
    ]


def with_kernel(ops: Iterable[Op], old: k.Kernel, new: k.Kernel) -> list[Op]:
    """``ops`` with every launch of ``old`` launching ``new`` instead."""
    return [replace(op, kernel=new) if op.kernel == old else op for op in ops]
