"""Every public symbol of the four packages has a docstring (the API reference is built from them)."""

from __future__ import annotations

import importlib
import inspect
import pkgutil

import pytest

PACKAGES = ("trncore", "trnblas", "trnfft", "trntensor")


def public_modules(package: str):
    root = importlib.import_module(package)
    yield root
    for info in pkgutil.walk_packages(root.__path__, prefix=package + "."):
        if any(part.startswith("_") for part in info.name.split(".")[1:]):
            continue
        yield importlib.import_module(info.name)


def documented(obj) -> bool:
    return bool((inspect.getdoc(obj) or "").strip())


def missing_docstrings(package: str) -> list[str]:
    missing = []
    for module in public_modules(package):
        if not documented(module):
            missing.append(f"{module.__name__} (module)")
        for name in getattr(module, "__all__", ()):
            obj = getattr(module, name)
            if not callable(obj) or type(obj).__module__ == "typing":
                continue  # constants and type aliases are documented where they are defined
            if not documented(obj):
                missing.append(f"{module.__name__}.{name}")
            if inspect.isclass(obj) and obj.__module__.split(".")[0] == package:
                for attr, member in vars(obj).items():
                    if attr.startswith("_") or not (
                        inspect.isfunction(member) or isinstance(member, property)
                    ):
                        continue
                    if not documented(member):
                        missing.append(f"{module.__name__}.{name}.{attr}")
    return sorted(set(missing))


@pytest.mark.parametrize("package", PACKAGES)
def test_every_public_symbol_has_a_docstring(package):
    assert missing_docstrings(package) == []
