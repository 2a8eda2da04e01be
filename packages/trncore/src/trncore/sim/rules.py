"""Hardware limits per target, with the source of each number (AWS's NKI docs, page and NKI version).

trn1 = NeuronCore-v2, trn2 = NeuronCore-v3. Only what the emulator enforces or the cost model uses
is listed here; all the per-target figures, with sources, are on docs/hardware.md.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["TARGETS", "TargetRules", "rules_for"]


@dataclass(frozen=True)
class TargetRules:
    """The limits and rates of one NeuronCore generation."""

    name: str
    nc_version: int
    #: AWS Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI (NKI 0.3.0): 128 partitions on every
    #: on-chip tensor.
    pmax: int = 128
    #: usable SBUF bytes per partition (total minus reserved; see docs/hardware.md).
    sbuf_bytes: int = 0
    #: AWS Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0): PSUM = 8 banks of 2 KiB per partition
    #: (same on v3).
    psum_bank_bytes: int = 2048
    psum_banks: int = 8
    #: AWS NKI docs, nki.isa.nc_matmul (NKI 0.3.0): stationary K, M <= 128, moving N <= 512 on v2/v3.
    matmul_k: int = 128
    matmul_m: int = 128
    matmul_n: int = 512
    #: AWS NKI docs, Using Logical Neuron Cores (NKI 0.3.0): LNC=2 only on trn2/trn3.
    max_lnc: int = 1
    #: AWS NKI docs, nki.isa.dma_transpose (NKI 0.3.0): a Trainium2+ feature (our reading: unavailable on
    #: trn1).
    has_dma_transpose: bool = False
    #: AWS NKI docs, nki.isa.activation (NKI 0.3.0): activation with a scalar (non-tensor) bias only from v3.
    scalar_bias: bool = False
    #: clocks in Hz (TensorE, VectorE, ScalarE, GpSimd)
    #: (AWS Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI (NKI 0.3.0)).
    tensor_hz: float = 0.0
    vector_hz: float = 0.0
    scalar_hz: float = 0.0
    gpsimd_hz: float = 0.0
    #: TensorE dense peak, bf16 (fp32 is a quarter)
    #: (AWS Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI (NKI 0.3.0)).
    tensor_peak_bf16: float = 0.0
    #: fp8 matmul speed-up over bf16 (AWS Trainium/Inferentia2 and Trainium2 Architecture Guides for NKI
    #: (NKI 0.3.0): v3 streams 4x128 fp8 inputs per cycle, v2 2x128).
    fp8_speedup: float = 1.0
    #: DMA bandwidth of one NeuronCore's 16 DMA engines, bytes/s (our estimate from the architecture guides;
    #: docs/hardware.md).
    dma_bytes_per_s: float = 0.0


TARGETS: dict[str, TargetRules] = {
    "trn1": TargetRules(
        name="trn1",
        nc_version=2,
        sbuf_bytes=180224,
        max_lnc=1,
        has_dma_transpose=False,
        scalar_bias=False,
        tensor_hz=2.8e9,
        vector_hz=1.12e9,
        scalar_hz=1.4e9,
        gpsimd_hz=1.4e9,
        tensor_peak_bf16=92e12,
        fp8_speedup=1.0,
        # AWS Trainium/Inferentia2 Architecture Guide for NKI (NKI 0.3.0): 16 DMA engines x ~27 GiB/s each.
        dma_bytes_per_s=16 * 27 * 2**30,
    ),
    "trn2": TargetRules(
        name="trn2",
        nc_version=3,
        sbuf_bytes=212984,
        max_lnc=2,
        has_dma_transpose=True,
        scalar_bias=True,
        tensor_hz=2.4e9,
        vector_hz=0.96e9,
        scalar_hz=1.2e9,
        gpsimd_hz=1.2e9,
        tensor_peak_bf16=79e12,
        fp8_speedup=2.0,
        # Trainium2 Architecture Guide for NKI: 128 DMA engines per chip at 3.5 TB/s -> 16 engines
        # per core (our division; docs/hardware.md).
        dma_bytes_per_s=3.5e12 / 8,
    ),
}


def rules_for(target: str) -> TargetRules:
    """The rules of ``target`` (``trn1``/``inf2``/``gen2`` or ``trn2``/``gen3``)."""
    from trncore.config import TARGET_ALIASES  # the spellings NEURON_PLATFORM_TARGET_OVERRIDE takes

    name = TARGET_ALIASES.get(target, target)
    if name not in TARGETS:
        raise ValueError(f"unsupported target {target!r}; the emulator knows trn1 and trn2")
    return TARGETS[name]
