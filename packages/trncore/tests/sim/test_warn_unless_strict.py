"""``trncore.sim.errors.warn_unless_strict``: the one place for "a warning at the kernel's line,
the rule's error in strict mode".

Checked against Python's own ``warnings`` semantics (the warning's file, line and category) and
the rule errors' documented form (rule in brackets, the kernel's ``file:line``), not against the
emulator's output.
"""

from __future__ import annotations

import warnings

import pytest

from trncore.sim.errors import AccumulationError, LanguageError, warn_unless_strict

pytestmark = [pytest.mark.simulator]

SITE = (__file__, 7)


def test_strict_raises_the_rule_at_the_site() -> None:
    with pytest.raises(AccumulationError) as info:
        warn_unless_strict(True, AccumulationError, "some-rule", "what went wrong", SITE, instead="; ran")
    err = info.value
    assert (err.rule, err.filename, err.lineno) == ("some-rule", __file__, 7)
    text = str(err)
    assert text.startswith("[accumulate: some-rule]")  # the family, then the rule
    assert "what went wrong (strict mode)" in text
    assert "; ran" not in text  # what the emulator does instead is for the warning only
    assert text.endswith(f"(at {__file__}:7)")


def test_default_warns_at_the_site_and_returns() -> None:
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_unless_strict(False, LanguageError, "some-rule", "what went wrong", SITE, instead="; ran")
    assert len(caught) == 1
    w = caught[0]
    assert w.category is UserWarning
    assert (w.filename, w.lineno) == (__file__, 7)
    assert str(w.message) == f"what went wrong; ran (at {__file__}:7)"


def test_without_a_site_the_warning_names_the_caller() -> None:
    def caller() -> None:
        warn_unless_strict(False, LanguageError, "some-rule", "no kernel line", None)

    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        caller()
    assert len(caught) == 1
    assert caught[0].filename == __file__
    assert str(caught[0].message) == "no kernel line"
