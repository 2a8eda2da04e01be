"""Kernel cache keys: stable across processes and hash seeds, different when anything differs."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap

import ml_dtypes
import numpy as np
import pytest

from trncore.keys import KernelKey, bucket_dim, bucket_shape


def gemm_kernel(a, b, tile_m=128):
    return a @ b


def other_kernel(a, b, tile_m=128):
    return a @ b


A = np.zeros((256, 128), np.float32)
B = np.zeros((128, 512), np.float32)


def key(**overrides):
    args = overrides.pop("args", (A, B))
    kernel = overrides.pop("kernel", gemm_kernel)
    params = overrides.pop("params", {"tile_m": 128, "tile_n": 512})
    return KernelKey.build(kernel, args, params, **overrides)


def test_same_call_same_key():
    assert key() == key() and key().digest == key().digest and hash(key()) == hash(key())
    assert key(params={"tile_n": 512, "tile_m": 128}) == key()  # parameter order is irrelevant


def test_specs_and_arrays_give_the_same_key():
    assert key(args=(((256, 128), "float32"), ((128, 512), "float32"))) == key()


@pytest.mark.parametrize(
    "change",
    [
        {"kernel": other_kernel},
        {"args": (A.astype(np.float64), B)},
        {"args": (A.astype(ml_dtypes.bfloat16), B)},
        {"args": (np.zeros((384, 128), np.float32), B)},
        {"params": {"tile_m": 64, "tile_n": 512}},
        {"params": {"tile_m": 128, "tile_n": 512, "accumulate": True}},
        {"params": {"tile_m": 128.0, "tile_n": 512}},
        {"target": "trn1"},
        {"flags": ("--opt-level=3",)},
    ],
)
def test_any_component_changes_the_digest(change):
    assert key(**change).digest != key().digest


def test_toolchain_version_is_part_of_the_key():
    import dataclasses

    other = dataclasses.replace(key(), toolchain=(("nki", "0.3.0"), ("neuronx-cc", "2.24")))
    assert other.digest != key().digest


def test_editing_the_source_changes_the_key(tmp_path):
    def load(body):
        path = tmp_path / f"k_{abs(hash(body))}.py"
        path.write_text(body, encoding="utf-8")
        namespace: dict = {}
        exec(compile(path.read_text(encoding="utf-8"), str(path), "exec"), namespace)
        return namespace["k"]

    k1 = load("def k(a):\n    return a + 1\n")
    k2 = load("def k(a):\n    return a + 2\n")
    assert KernelKey.build(k1, [A]).source != KernelKey.build(k2, [A]).source


def test_digest_is_stable_across_processes_and_hash_seeds(tmp_path):
    script = tmp_path / "print_key.py"
    script.write_text(
        textwrap.dedent(
            """
            import numpy as np
            from trncore.keys import KernelKey
            from test_keys_module import gemm_kernel
            params = {"tile_m": 128, "name": "x", "sizes": (1, 2), "opts": {"b": 1.5, "a": None}}
            a = np.zeros((256, 128), np.float32)
            print(KernelKey.build(gemm_kernel, [a], params, target="trn1").digest)
            """
        ),
        encoding="utf-8",
    )
    (tmp_path / "test_keys_module.py").write_text(
        "def gemm_kernel(a, b, tile_m=128):\n    return a @ b\n", encoding="utf-8"
    )
    digests = set()
    for seed in ("0", "1", "12345"):
        env = dict(
            os.environ,
            PYTHONHASHSEED=seed,
            PYTHONPATH=str(tmp_path) + os.pathsep + os.environ.get("PYTHONPATH", ""),
        )
        out = subprocess.run(
            [sys.executable, str(script)], env=env, capture_output=True, text=True, check=True
        )
        digests.add(out.stdout.strip())
    assert len(digests) == 1 and len(digests.pop()) == 24


def test_unkeyable_parameter_is_a_type_error():
    with pytest.raises(TypeError, match="cannot be part of a kernel key"):
        key(params={"thing": object()})
    with pytest.raises(TypeError, match="array or a \\(shape, dtype\\) spec"):
        KernelKey.build(gemm_kernel, [42])


@pytest.mark.parametrize(
    ("n", "tile", "geometric", "expected"),
    [
        (1, 128, False, 128),
        (128, 128, False, 128),
        (129, 128, False, 256),
        (1000, 128, False, 1024),
        (0, 128, False, 128),
        (129, 128, True, 256),
        (385, 128, True, 512),
        (1000, 128, True, 1024),
        (1025, 128, True, 2048),
        (7, 4, False, 8),
    ],
)
def test_bucket_dim(n, tile, geometric, expected):
    assert bucket_dim(n, tile, geometric=geometric) == expected
    assert expected >= n and expected % tile == 0


def test_bucketing_bounds_distinct_keys():
    linear = {bucket_dim(n, 128) for n in range(1, 4097)}
    geometric = {bucket_dim(n, 128, geometric=True) for n in range(1, 4097)}
    assert len(linear) == 32 and len(geometric) == 6


def test_bucket_shape_and_errors():
    assert bucket_shape((200, 7, 3), (128, None, 2)) == (256, 7, 4)
    with pytest.raises(ValueError, match="differ in rank"):
        bucket_shape((1, 2), (128,))
    with pytest.raises(ValueError, match="tile > 0"):
        bucket_dim(5, 0)
