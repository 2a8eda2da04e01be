"""C = A_T.T @ B with A_T [K, M] and B [K, N], fp32 accumulation (outside-author style)."""

import nki
import nki.isa as nisa
import nki.language as nl


@nki.jit
def tiled_matmul(a_t, b):
    K, M = a_t.shape
    K2, N = b.shape
    assert K == K2
    TM = nl.tile_size.gemm_stationary_fmax
    TK = nl.tile_size.pmax
    TN = nl.tile_size.gemm_moving_fmax
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // TM):
        for n in nl.affine_range(N // TN):
            acc = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.psum)
            for k in nl.sequential_range(K // TK):
                lhs = nl.ndarray((TK, TM), dtype=a_t.dtype, buffer=nl.sbuf)
                rhs = nl.ndarray((TK, TN), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=lhs, src=a_t[k * TK : (k + 1) * TK, m * TM : (m + 1) * TM])
                nisa.dma_copy(dst=rhs, src=b[k * TK : (k + 1) * TK, n * TN : (n + 1) * TN])
                nisa.nc_matmul(dst=acc, stationary=lhs, moving=rhs, accumulate=(k > 0))
            res = nl.ndarray((TM, TN), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=res, src=acc)
            nisa.dma_copy(dst=c[m * TM : (m + 1) * TM, n * TN : (n + 1) * TN], src=res)
    return c


@nki.jit
def blocked_matmul(a_t, b):
    """Same product, one SBUF accumulator row block per m, PSUM evicted with tensor_tensor."""
    K, M = a_t.shape
    _, N = b.shape
    c = nl.ndarray((M, N), dtype=nl.float32, buffer=nl.shared_hbm)
    for m in nl.affine_range(M // 128):
        acc = nl.ndarray((128, N // 512, 512), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=acc, value=0.0)
        for k in nl.sequential_range(K // 128):
            lhs = nl.ndarray((128, 128), dtype=a_t.dtype, buffer=nl.sbuf)
            nisa.dma_copy(dst=lhs, src=a_t[nl.ds(k * 128, 128), nl.ds(m * 128, 128)])
            for n in nl.affine_range(N // 512):
                rhs = nl.ndarray((128, 512), dtype=b.dtype, buffer=nl.sbuf)
                nisa.dma_copy(dst=rhs, src=b[nl.ds(k * 128, 128), nl.ds(n * 512, 512)])
                ps = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum)
                nisa.nc_matmul(ps, lhs, rhs)
                nisa.tensor_tensor(dst=acc[:, n, :], data1=acc[:, n, :], data2=ps, op=nl.add)
        nisa.dma_copy(dst=c[m * 128 : (m + 1) * 128, :], src=acc.reshape((128, N)))
    return c
