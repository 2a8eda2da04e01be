"""trnblas's registration with trncore: the bottom layer every other trnblas module builds on.

:data:`library` is trnblas's :class:`trncore.dispatch.Library` (its backend setting and its declared
operations); the package re-exports its backend functions. Modules declare operations with
``library.operation(...)`` (see :mod:`trnblas._ops`) rather than importing the package itself, so
imports go one way: ``_library`` → ``_pytorch`` → ``kernels`` → ``_drivers`` → ``_ops`` → public
modules.
"""

from trncore import Library

__all__ = ["__version__", "backend", "explain", "get_backend", "library", "module_getattr", "set_backend"]

__version__ = "0.1.0"

library: Library = Library.register("trnblas", __version__)
set_backend = library.set_backend
backend = library.backend  # with backend("nki"): ... (scoped to the block)
get_backend = library.get_backend
explain = library.explain  # the route a large call takes now, and why
module_getattr = library.module_getattr  # the lazily evaluated HAS_NKI
