"""A test file whose import fails (a module of the harness that is not installed)."""

import a_module_nobody_installed  # noqa: F401


def test_unreachable():
    pass
