"""Forms AWS's NKI library writes that NKI 0.3.0 accepts, each next to its invalid neighbour."""

from __future__ import annotations

from dataclasses import FrozenInstanceError, dataclass

import numpy as np
import pytest

from trncore.sim import nisa, nl, simulate
from trncore.sim.errors import DtypeError, TargetError


def test_nkiobject_generated_init_uses_class_defaults_and_post_init() -> None:
    # AWS NKI language guide, "Class Support" (Neuron SDK 2.29, NKI 0.3.0): the generated
    # initializer is `def __init__(self, x=None, y=False)` for `x: int` and `y: bool = False`,
    # and it calls `self.__post_init__()`.
    class Scope(nl.NKIObject):
        start: int
        depth: int = 0
        top: int | None = None

        def __post_init__(self) -> None:
            assert self.top is None  # nkilib's allocator checks its fields like this
            self.top = self.start

    s = Scope(64)
    assert (s.start, s.depth, s.top) == (64, 0, 64)
    assert Scope(start=8, depth=2).depth == 2
    assert Scope().start is None  # no default: None
    with pytest.raises(TypeError, match="unexpected fields"):
        Scope(stop=3)  # the invalid neighbour: a field the class does not declare
    with pytest.raises(TypeError, match="at most 3 positional"):
        Scope(1, 2, 3, 4)


def test_frozen_dataclass_nkiobject_constructs_and_stays_frozen() -> None:
    @dataclass(frozen=True)
    class Limits(nl.NKIObject):
        alus: int = 4
        lanes: int = 16

    lim = Limits(alus=2)
    assert (lim.alus, lim.lanes) == (2, 16)
    with pytest.raises(FrozenInstanceError):
        lim.alus = 3  # type: ignore[misc]

    def kernel(a, cfg):
        out = nl.ndarray(a.shape, a.dtype, buffer=nl.shared_hbm)
        nl.store(out, nl.multiply(nl.load(a), float(cfg.alus * cfg.lanes)))
        return out

    a = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(simulate(kernel)(a, lim), 32 * a)


def test_packed_x4_dtypes_are_storage_on_trn1_and_trn2(target: str) -> None:
    # nki.language dtypes (NKI 0.3.0): float8_e4m3fn_x4 / float8_e5m2_x4 / float4_e2m1fn_x4 are
    # "4x packed ... custom data type for nki.isa.nc_matmul_mx on NeuronCore-v4". On trn1/trn2 a
    # kernel may hold them (memset 0, dma_copy); the 0.3.0 update guide's memset rule: value=0.
    from trncore.sim import dtypes

    words = np.array([[0x3C3A3836, 0x01020304], [0, 0xFFFFFFFF]], np.uint32)
    packed = words.view(dtypes.storage_dtype("float8_e4m3fn_x4")).reshape(2, 2)

    def copy_and_clear(x):
        t = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=t)
        z = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.memset(dst=z, value=0)
        zeros = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=zeros, src=z)
        return out, zeros

    out, zeros = simulate(copy_and_clear)(packed)
    assert out.dtype == packed.dtype
    np.testing.assert_array_equal(out.view(np.uint32), words)  # bit-exact
    np.testing.assert_array_equal(zeros.view(np.uint32), np.zeros_like(words))

    def memset_one(x):
        z = nl.ndarray((2, 2), dtype=nl.float8_e5m2_x4, buffer=nl.sbuf)
        nisa.memset(dst=z, value=1)  # the invalid neighbour: x4 takes only value=0
        return x

    with pytest.raises(DtypeError, match=r"memset-x4-value.*test_nkilib_styles.py:\d+"):
        simulate(memset_one)(np.zeros((2, 2), np.float32))

    def add_packed(x):
        t = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray(x.shape, dtype=nl.float8_e4m3fn_x4, buffer=nl.sbuf)
        nisa.tensor_scalar(dst=u, data=t, op0=nl.add, operand0=1.0)  # compute on x4: trn3 only
        return x

    with pytest.raises(TargetError, match="packed-x4-compute"):
        simulate(add_packed)(packed)

    def convert(x):
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)  # a DMA cast from x4 to float32: no such conversion
        return x

    with pytest.raises(DtypeError, match="packed-x4-convert"):
        simulate(convert)(packed)


def test_nki_dtype_and_collectives_import_as_nkilib_does() -> None:
    import importlib

    import trncore.sim as sim

    sim.install()
    try:
        nki = importlib.import_module("nki")
        ncc = importlib.import_module("nki.collectives")

        def kernel(x, dtype: nki.dtype = nl.bfloat16):  # nkilib's annotation of dtype params
            out = nl.ndarray(x.shape, dtype=dtype, buffer=nl.shared_hbm)
            nl.store(out, nl.load(x))
            return out

        assert nki.dtype.bfloat16 == nl.bfloat16 == "bfloat16"
        x = np.arange(6, dtype=np.float32).reshape(2, 3)
        np.testing.assert_array_equal(simulate(kernel)(x).astype(np.float32), x)
        group = ncc.ReplicaGroup([[0, 1]])
        assert group.groups == [[0, 1]]
        from trncore.sim import collectives

        assert ncc.all_reduce is collectives.all_reduce  # emulated (tests/sim/test_collectives.py)
        assert ncc.all_to_all_v is collectives.all_to_all_v  # (tests/sim/test_collectives_v.py)
    finally:
        sim.uninstall()


def test_nkiobject_plain_class_attributes_are_fields() -> None:
    # nkilib's attention kernel declares `section_idx = None` without an annotation and builds
    # SectionParams(section_idx=..., ...): every class attribute is a field of an NKI class.
    class SectionParams(nl.NKIObject):
        section_idx = None
        section_offset = 0
        limit: int = 8

        def span(self) -> int:
            return self.section_offset + self.limit

    sp = SectionParams(section_idx=2, section_offset=256)
    assert (sp.section_idx, sp.section_offset, sp.limit, sp.span()) == (2, 256, 8, 264)
    assert SectionParams().section_offset == 0
    with pytest.raises(TypeError, match="unexpected fields"):
        SectionParams(span=1)  # a method is not a field


def test_if_tensor_tests_the_handle_and_data_reads_stay_refused(target: str) -> None:
    # NKI language guide, "NKI Values" (SDK 2.29, NKI 0.3.0): values behave as in Python and a
    # tensor is a value naming device memory, so `if bias:` on an optional argument means
    # "given" (nkilib's mlp_tkg writes `if params.expert_params.expert_index:`).
    from trncore.sim.errors import HostReadError

    def kernel(x, bias=None):
        t = nl.load(x)
        if bias:
            t = nl.add(t, nl.load(bias))
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, t)
        return out

    x = np.ones((4, 4), np.float32)
    np.testing.assert_array_equal(simulate(kernel)(x), x)
    np.testing.assert_array_equal(simulate(kernel)(x, 2 * x), 3 * x)

    def reads_data(x):
        t = nl.load(x)
        if float(t[0:1, 0:1]) > 0:  # the invalid neighbour: the data is on the device
            pass
        return x

    with pytest.raises(HostReadError, match=r"no-host-read.*test_nkilib_styles.py:\d+"):
        simulate(reads_data)(x)


def test_sbuf_capacity_is_counted_per_partition(target: str) -> None:
    # nl.tile_size.total_available_sbuf_size is a per-partition budget; nl.ndarray's address=
    # (partition_offset, free_offset) places a tile on partitions [offset, offset + P).
    from trncore.sim.errors import CapacityError

    cols = 30000  # 120 000 bytes per partition of float32: two of them exceed trn1 and trn2

    def halves(x, upper_start):
        a = nl.ndarray((64, cols), dtype=nl.float32, buffer=nl.sbuf)  # partitions 0..63
        b = nl.ndarray((64, cols), dtype=nl.float32, buffer=nl.sbuf, address=(upper_start, 0))
        nisa.memset(dst=a, value=1.0)
        nisa.memset(dst=b, value=2.0)
        nisa.tensor_tensor(dst=a, data1=a, data2=b, op=nl.add)
        out = nl.ndarray((64, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=a)
        return out

    x = np.zeros((1, 1), np.float32)
    np.testing.assert_array_equal(simulate(halves)(x, 64), np.full((64, cols), 3.0, np.float32))
    with pytest.raises(CapacityError, match=r"sbuf-capacity.*test_nkilib_styles.py:\d+"):
        simulate(halves)(x, 32)  # partitions 32..63 hold both tiles: the invalid neighbour


def test_tiles_at_one_explicit_address_share_it(target: str) -> None:
    # nkilib's modular allocator places several tiles at one address on purpose (rotating
    # buffers): they occupy that byte range once. An address past the end of SBUF is refused.
    from trncore.sim.errors import CapacityError

    cols = 30000

    def rotating(x, start):
        tiles = [
            nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf, address=(0, start)) for _ in range(3)
        ]
        for i, t in enumerate(tiles):
            nisa.memset(dst=t, value=float(i))
        out = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=tiles[0])
        nisa.dma_copy(dst=out, src=tiles[2])
        return out

    x = np.zeros((1, 1), np.float32)
    simulate(rotating)(x, 0)  # three 120 000-byte tiles at byte 0: fits
    with pytest.raises(CapacityError, match=r"address-range.*test_nkilib_styles.py:\d+"):
        simulate(rotating)(x, 100000)  # [100000, 220000) runs past the end of SBUF


def test_sbuf_peak_of_placed_tiles_with_and_without_auto_placed_ones(target: str) -> None:
    # The capacity sweep's SBUF peak per partition: tiles at explicit addresses count by the
    # highest end byte live (nl.ndarray address=, NKI 0.3.0), auto-placed ones add their bytes;
    # the sweep takes a shortcut while only placed tiles are live, so both phases are checked.
    import trncore.sim as sim

    def mixed(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        for start in (0, 40000):  # placed tiles alone, each live at its memset: end bytes 4000, 44000
            t = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf, address=(0, start))
            nisa.memset(dst=t, value=1.0)
        wide = nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf, address=(0, 80000))
        nisa.memset(dst=wide, value=2.0)
        nisa.dma_copy(dst=out, src=wide[:, 0:8])
        auto = nl.ndarray((128, 2500), dtype=nl.float32, buffer=nl.sbuf)  # 10000 B, with wide live
        nisa.memset(dst=auto, value=3.0)
        nisa.dma_copy(dst=out, src=auto[:, 0:8])
        nisa.dma_copy(dst=out, src=wide[:, 0:8])
        return out

    prog = sim.trace(mixed, ((1, 1), "float32"))
    assert prog.sbuf_peak == 84000 + 10000  # wide's end byte plus the auto-placed tile's bytes
    np.testing.assert_array_equal(simulate(mixed)(np.zeros((1, 1), np.float32)), 2.0)

    def placed_only(x):
        out = nl.ndarray((128, 8), dtype=nl.float32, buffer=nl.shared_hbm)
        tiles = [
            nl.ndarray((128, 1000), dtype=nl.float32, buffer=nl.sbuf, address=(0, s))
            for s in (8000, 0, 4000)
        ]
        for t in tiles:
            nisa.memset(dst=t, value=1.0)
        for t in tiles:
            nisa.dma_copy(dst=out, src=t[:, 0:8])
        return out

    assert sim.trace(placed_only, ((1, 1), "float32")).sbuf_peak == 12000


def test_dataclass_nkiobjects_are_built_as_nki_builds_them() -> None:
    # "classes with and without the @dataclass decorator will be compiled in the same way"
    # (NKI language guide, Class Support): nkilib's @dataclass classes declare fields without
    # defaults (MLPTKGConstantsDimensionSizes) or without annotations (SectionParams) and are
    # constructed by keyword with some fields left out.
    from dataclasses import field

    @dataclass
    class Sizes(nl.NKIObject):
        pmax: int
        remainder: int
        tags: list = field(default_factory=list)
        section_idx = None

    s = Sizes(pmax=128, section_idx=3)
    assert (s.pmax, s.remainder, s.tags, s.section_idx) == (128, None, [], 3)
    assert Sizes(128, 5).remainder == 5
    with pytest.raises(TypeError, match="unexpected fields"):
        Sizes(pmin=1)  # the invalid neighbour: a field the class does not have

    @dataclass
    class Explicit(nl.NKIObject):
        n: int

        def __init__(self, n: int) -> None:  # a user-written initializer is used as written
            self.n = 2 * n

    assert Explicit(4).n == 8


def test_scalar_engine_tensor_copy_stays_a_trn1_target_error() -> None:
    # nki.isa.tensor_copy (NKI 0.3.0): "On NeuronCore v2, tensor_copy is not supported on the
    # Scalar Engine. Instead, use nisa.activation with op=nl.copy" (nkilib's conv1d does this
    # copy; under trn1 it must keep failing at its line). trn2 accepts it.
    from trncore.sim.errors import TargetError
    from trncore.sim.runner import run_kernel

    def copy_on_scalar(x):
        t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
        nisa.tensor_copy(dst=u, src=t, engine=nisa.engine.scalar)
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out, src=u)
        return out

    x = np.arange(8, dtype=np.float32).reshape(2, 4)
    np.testing.assert_array_equal(run_kernel(copy_on_scalar, [x], target="trn2"), x)
    with pytest.raises(TargetError, match=r"tensor-copy-scalar.*test_nkilib_styles.py:\d+"):
        run_kernel(copy_on_scalar, [x], target="trn1")


def test_chained_ap_addresses_the_storage(target: str) -> None:
    # SDK 2.31 access-pattern page ("Composition and .ap on a view"): inner =
    # t.ap([[256, 128], [2, 128]]); outer = inner.ap([[256, 128], [1, 64]]) is equivalent to
    # t.ap([[256, 128], [1, 64]]) — the inner pattern has no effect. (SDK 2.29 forbade it.) An
    # explicit offset is added to the view's (the NkiTensor.ap reference, SDK 2.31-2.32: "offset=N
    # shifts by N additional elements"): t[:, 32:160] starts at element 32, so offset=32 is 64.
    def chained(x):
        t = nl.ndarray((128, 256), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=t, src=x)
        inner = t.ap(pattern=[[256, 128], [2, 128]])
        outer = inner.ap(pattern=[[256, 128], [1, 64]])
        sliced = t[0:128, 32:160].ap(pattern=[[256, 128], [1, 64]], offset=32)
        a = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, 64), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=a, src=outer)
        nisa.tensor_copy(dst=b, src=sliced)
        out = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.dma_copy(dst=out[:, 0:64], src=a)
        nisa.dma_copy(dst=out[:, 64:128], src=b)
        return out

    x = np.arange(128 * 256, dtype=np.float32).reshape(128, 256)
    got = simulate(chained)(x)
    np.testing.assert_array_equal(got[:, :64], x[:, :64])
    np.testing.assert_array_equal(got[:, 64:], x[:, 64:128])


def test_psum_tiles_at_one_bank_address_share_the_bank(target: str) -> None:
    # nkilib's attention kernel allocates a PSUM tile per (group, tile) at address
    # (0, (k % 4) * 2048): tiles at one bank address occupy that bank once.
    from trncore.sim.errors import CapacityError

    def banks(x, distinct):
        tiles = [
            nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum, address=(0, (k % distinct) * 2048))
            for k in range(12)
        ]
        for t in tiles:
            nisa.memset(dst=t, value=0.0)
        out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
        for t in tiles:
            s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_copy(dst=s, src=t)
            nisa.dma_copy(dst=out, src=s)
        return out

    x = np.zeros((1, 1), np.float32)
    simulate(banks)(x, 4)  # 12 live tiles in 4 banks
    with pytest.raises(CapacityError, match="9 live PSUM banks"):
        simulate(banks)(x, 12)  # 12 placed tiles in 12 banks: the 9th passes the 8 banks
    with pytest.raises(CapacityError, match="psum-banks"):

        def twelve_banks(x):
            tiles = [nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.psum) for _ in range(12)]
            for t in tiles:
                nisa.memset(dst=t, value=0.0)
            out = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.shared_hbm)
            for t in tiles:
                s = nl.ndarray((128, 512), dtype=nl.float32, buffer=nl.sbuf)
                nisa.tensor_copy(dst=s, src=t)
                nisa.dma_copy(dst=out, src=s)
            return out

        simulate(twelve_banks)(x)  # the invalid neighbour: 12 live tiles, 12 banks > 8


def test_a_psum_tensor_may_span_banks_each_matmul_writes_one(target: str) -> None:
    # nkilib's rotational top-k allocates [128, 1024] float32 PSUM tensors (two 2 KiB banks per
    # partition), fills them 512 columns per matmul and copies the whole tensor out with one
    # tensor_copy. The architecture guide's one-bank limit is the matmul's output ("each
    # nc_matmul can only write to a single PSUM bank"); a tensor takes the banks it spans.
    from trncore.sim.errors import CapacityError
    from trncore.sim.testing import assert_reported_at

    def rotate(r, x, live, offset):
        rot = nl.ndarray((128, 128), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=rot, src=r)
        xs = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
        nisa.dma_copy(dst=xs, src=x)
        held = [nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.psum) for _ in range(live)]
        out = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.shared_hbm)
        res = nl.ndarray((128, 1024), dtype=nl.float32, buffer=nl.sbuf)
        for p in held:
            for j in range(2):
                cols = nl.ds(offset + 512 * j, 512)
                nisa.nc_matmul(dst=p[:, cols], stationary=rot, moving=xs[:, nl.ds(512 * j, 512)])  # MATMUL
        for p in held:  # every tensor is live until here
            nisa.tensor_copy(dst=res, src=p)
        nisa.dma_copy(dst=out, src=res)
        return out

    rng = np.random.default_rng(3)
    r = np.roll(np.eye(128, dtype=np.float32), 1, axis=1)  # a rotation of the partitions
    x = rng.standard_normal((128, 1024)).astype(np.float32)
    got = simulate(rotate)(r, x, 4, 0)  # four two-bank tensors: all 8 banks
    np.testing.assert_allclose(got, r.T @ x, rtol=1e-6, atol=1e-6)
    with pytest.raises(CapacityError, match="psum-banks"):
        simulate(rotate)(r, x, 5, 0)  # the invalid neighbour: 10 banks live
    # the other invalid neighbour: a matmul whose 512 columns start mid-bank cross into the next
    with pytest.raises(CapacityError, match="psum-tile-bank") as exc:
        simulate(rotate)(r, x, 1, 256)
    assert_reported_at(exc.value, rotate, "# MATMUL")


def test_tiles_hold_sbuf_from_their_first_use(target: str) -> None:
    # nkilib's rope allocates its intermediate tiles up front and fills them one after another;
    # a tile holds memory over its live range (first use to last use), not from its allocation.
    cols = 30000  # 120 000 bytes per partition: two live at once exceed trn1 and trn2

    def sequential(x):
        a = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)
        b = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.sbuf)  # allocated, not yet used
        out = nl.ndarray((128, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        nisa.memset(dst=a, value=1.0)
        nisa.dma_copy(dst=out, src=a)  # last use of a
        nisa.memset(dst=b, value=2.0)  # first use of b
        nisa.dma_copy(dst=out, src=b)
        return out

    got = simulate(sequential)(np.zeros((1, 1), np.float32))
    np.testing.assert_array_equal(got, np.full((128, cols), 2.0, np.float32))


def test_small_auto_tiles_may_sit_on_other_quadrants(target: str) -> None:
    # The compiler places tiles; one of at most 32 partitions may start at 0/32/64/96 (the
    # start-partition rule), so four such tiles of 120 000 bytes each fit side by side; a fifth
    # live at the same time cannot fit anywhere (the invalid neighbour).
    from trncore.sim.errors import CapacityError

    cols = 30000

    def quadrants(x, n):
        tiles = [nl.ndarray((32, cols), dtype=nl.float32, buffer=nl.sbuf) for _ in range(n)]
        for i, t in enumerate(tiles):
            nisa.memset(dst=t, value=float(i))
        out = nl.ndarray((32, cols), dtype=nl.float32, buffer=nl.shared_hbm)
        for t in tiles:  # all live until here
            nisa.dma_copy(dst=out, src=t)
        return out

    x = np.zeros((1, 1), np.float32)
    np.testing.assert_array_equal(simulate(quadrants)(x, 4), np.full((32, cols), 3.0, np.float32))
    with pytest.raises(CapacityError, match="sbuf-capacity"):
        simulate(quadrants)(x, 5)
