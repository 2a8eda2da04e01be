"""Built-in geometries (Ångström) for the DF-MP2 example, and an .xyz reader.

Near-equilibrium structures written out by hand from standard bond lengths and angles; they only
need to be reasonable molecules, since every check compares with PySCF on the same geometry.
"""

from __future__ import annotations

import math
from pathlib import Path

__all__ = ["BUILTIN", "alkane", "load_geometry"]


def _ring(radius: float, n: int = 6, phase: float = 0.0) -> list[tuple[float, float]]:
    return [
        (radius * math.cos(phase + 2 * math.pi * k / n), radius * math.sin(phase + 2 * math.pi * k / n))
        for k in range(n)
    ]


def _benzene() -> str:
    carbons = _ring(1.3915)  # C–C 1.3915 Å
    hydrogens = _ring(1.3915 + 1.0800)  # C–H 1.080 Å, radial
    atoms = [f"C {x:.6f} {y:.6f} 0.0" for x, y in carbons] + [f"H {x:.6f} {y:.6f} 0.0" for x, y in hydrogens]
    return "; ".join(atoms)


def _naphthalene() -> str:
    # D2h, long axis along x, in the xy plane: bridgehead C (0, ±0.7145), α-C (±1.2437, ±1.4060),
    # β-C (±2.4332, ±0.7078), H on α (±1.2427, ±2.4930), H on β (±3.3785, ±1.2404).
    atoms = ["C 0.0 0.7145 0.0", "C 0.0 -0.7145 0.0"]
    for sx in (1, -1):
        for sy in (1, -1):
            atoms += [
                f"C {sx * 1.2437:.4f} {sy * 1.4060:.4f} 0.0",
                f"C {sx * 2.4332:.4f} {sy * 0.7078:.4f} 0.0",
                f"H {sx * 1.2427:.4f} {sy * 2.4930:.4f} 0.0",
                f"H {sx * 3.3785:.4f} {sy * 1.2404:.4f} 0.0",
            ]
    return "; ".join(atoms)


def alkane(carbons: int) -> str:
    """An all-trans n-alkane C_nH_(2n+2): zig-zag carbon chain (C–C 1.54 Å, tetrahedral angles),
    C–H 1.09 Å; for benchmarks that need molecules of a chosen size (cc-pVDZ: 24n + 10 functions)."""
    if carbons < 1:
        raise ValueError(f"carbons must be >= 1, got {carbons}")
    half = math.radians(109.47 / 2)
    dx, dy = 1.54 * math.sin(half), 1.54 * math.cos(half)
    hz, hy = 1.09 * math.sin(half), 1.09 * math.cos(half)
    atoms = []
    for i in range(carbons):
        x, up = i * dx, i % 2
        y = dy if up else 0.0
        side = 1.0 if up else -1.0  # hydrogens point away from the chain's zig
        atoms.append(f"C {x:.4f} {y:.4f} 0.0")
        atoms.append(f"H {x:.4f} {y + side * hy:.4f} {hz:.4f}")
        atoms.append(f"H {x:.4f} {y + side * hy:.4f} {-hz:.4f}")
    # Terminal hydrogens where the chain's next carbon would be, 1.09 Å away.
    atoms.append(f"H {-hz:.4f} {hy:.4f} 0.0")  # C0 is a lower carbon; its missing neighbour is up
    last_up = (carbons - 1) % 2
    end_y = (dy - hy) if last_up else hy
    atoms.append(f"H {(carbons - 1) * dx + hz:.4f} {end_y:.4f} 0.0")
    return "; ".join(atoms)


BUILTIN: dict[str, str] = {
    "water": "O 0.0 0.0 0.1173; H 0.0 0.7572 -0.4692; H 0.0 -0.7572 -0.4692",
    "ammonia": "N 0.0 0.0 0.1162; H 0.0 0.9377 -0.2711; H 0.8121 -0.4689 -0.2711; H -0.8121 -0.4689 -0.2711",
    "methane": "C 0 0 0; H 0.6291 0.6291 0.6291; H -0.6291 -0.6291 0.6291; "
    "H -0.6291 0.6291 -0.6291; H 0.6291 -0.6291 -0.6291",
    "benzene": _benzene(),
    "naphthalene": _naphthalene(),
}


def load_geometry(name_or_path: str) -> str:
    """A PySCF atom string for a built-in molecule name or an .xyz file (Ångström)."""
    key = name_or_path.lower()
    if key in BUILTIN:
        return BUILTIN[key]
    path = Path(name_or_path)
    if path.suffix.lower() != ".xyz" or not path.is_file():
        raise ValueError(
            f"--molecule must be one of {', '.join(BUILTIN)} or an existing .xyz file, got {name_or_path!r}"
        )
    lines = path.read_text(encoding="utf-8").splitlines()
    try:
        count = int(lines[0].split()[0])
    except (IndexError, ValueError):
        raise ValueError(f"{path}: the first line of an .xyz file must be the number of atoms") from None
    atoms = [" ".join(line.split()[:4]) for line in lines[2 : 2 + count]]
    if len(atoms) != count or any(len(a.split()) != 4 for a in atoms):
        raise ValueError(f"{path}: expected {count} lines 'Element x y z' after the comment line")
    return "; ".join(atoms)
