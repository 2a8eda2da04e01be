"""``nl.NKIObject``: user classes as kernel arguments and compile-time configuration.

AWS NKI language guide, "Class Support" (Neuron SDK 2.29, NKI 0.3.0): every NKI class is like a
data class; "the @dataclass decorator is optional; classes with and without the @dataclass
decorator will be compiled in the same way", and where the user writes no initializer NKI
generates ``def __init__(self, x=None, y=False)`` (the class's default for each field, ``None``
where it has none) that ends with ``self.__post_init__()``. So here:

- a subclass without its own ``__init__`` gets that generated initializer;
- a ``@dataclass`` subclass is constructed the same way (the dataclass's generated ``__init__``
  is bypassed: AWS's library declares dataclass fields without defaults, or without annotations,
  and constructs them by keyword); ``field(default_factory=...)`` still supplies its default;
- a user-written ``__init__`` is used as written.

Fields are the annotated names, then bare class attributes (not methods or descriptors).
Instances' fields (``vars(obj)``) are their identity in kernel cache keys (:mod:`trncore.keys`).
"""

from __future__ import annotations

import dataclasses
from typing import Any

__all__ = ["NKIObject"]


def _nki_fields(cls: type) -> list[str]:
    fields: list[str] = []
    for klass in reversed(cls.__mro__):
        if klass is object or klass is NKIObject:
            continue
        for name in getattr(klass, "__annotations__", {}):
            if name not in fields and not name.startswith("__"):
                fields.append(name)
        for name, value in vars(klass).items():
            if name.startswith("__") or name in fields or callable(value):
                continue
            if isinstance(value, (classmethod, staticmethod, property)):
                continue
            fields.append(name)
    return fields


def _default(cls: type, name: str) -> Any:
    if dataclasses.is_dataclass(cls):
        for f in dataclasses.fields(cls):
            if f.name == name and f.default_factory is not dataclasses.MISSING:
                return f.default_factory()
    return getattr(cls, name, None)


def _generated_by_dataclass(init: Any) -> bool:
    code = getattr(init, "__code__", None)
    return code is not None and code.co_filename.startswith("<")


class _NkiObjectMeta(type):
    """Constructs ``@dataclass`` NKIObject subclasses with NKI's generated initializer."""

    def __call__(cls, *args: Any, **kwargs: Any) -> Any:
        if dataclasses.is_dataclass(cls) and _generated_by_dataclass(cls.__init__):
            obj = cls.__new__(cls)
            NKIObject.__init__(obj, *args, **kwargs)
            return obj
        return super().__call__(*args, **kwargs)


class NKIObject(metaclass=_NkiObjectMeta):
    """Base class for user classes passed into kernels as compile-time configuration."""

    #: Marks instances whose fields (``vars(obj)``) are compile-time values (read by trncore.keys).
    __nki_object__ = True

    def __init__(self, *args: Any, **values: Any) -> None:
        cls = type(self)
        fields = _nki_fields(cls)
        if len(args) > len(fields):
            raise TypeError(f"{cls.__name__}() takes at most {len(fields)} positional arguments")
        unknown = set(values) - set(fields)
        if unknown:
            raise TypeError(f"{cls.__name__}() got unexpected fields {sorted(unknown)}; fields: {fields}")
        given = dict(zip(fields, args))
        for name in fields:
            if name in given:
                value = given[name]
            elif name in values:
                value = values[name]
            else:
                value = _default(cls, name)
            object.__setattr__(self, name, value)
        post_init = getattr(self, "__post_init__", None)
        if post_init is not None:
            post_init()
