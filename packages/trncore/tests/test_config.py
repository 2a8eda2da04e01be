"""trncore.config: the one reader of the environment, its boolean parser and its change counter."""

from __future__ import annotations

import os

import pytest

from trncore import config


def test_os_environ_keeps_its_class_and_every_change_bumps_the_generation(monkeypatch):
    assert type(os.environ) is os._Environ  # nothing replaces os.environ's class
    name = "TRNCORE_TEST_CONFIG_VARIABLE"
    monkeypatch.delenv(name, raising=False)
    changes = [
        lambda: os.environ.__setitem__(name, "1"),
        lambda: os.environ.update({name: "2"}),
        lambda: os.environ.pop(name),
        lambda: os.environ.setdefault(name, "3"),
        lambda: os.environ.__delitem__(name),
        lambda: os.putenv(name, "4"),  # below os.environ: still an audited change
        lambda: os.unsetenv(name),
    ]
    for change in changes:
        before = config.GENERATION[0]
        change()
        assert config.GENERATION[0] > before


def test_reading_the_environment_does_not_bump_the_generation(monkeypatch):
    monkeypatch.setenv("TRNSCI_USE_SIMULATOR", "1")
    before = config.GENERATION[0]
    assert config.read_bool("trncoretest", "USE_SIMULATOR") is True
    assert config.current_target() in ("trn1", "trn2")
    assert config.GENERATION[0] == before


@pytest.mark.parametrize(("raw", "expected"), [("1", True), (" Yes ", True), ("on", True), ("0", False),
                                                ("off", False), ("", False), ("FALSE", False)])
def test_one_boolean_parser(raw, expected):
    assert config.parse_bool("SOME_VARIABLE", raw) is expected


def test_a_bad_boolean_names_the_variable(monkeypatch):
    with pytest.raises(ValueError, match="SOME_VARIABLE='maybe' is not a boolean"):
        config.parse_bool("SOME_VARIABLE", "maybe")
    monkeypatch.setenv("TRNCORETEST_REQUIRE_NKI", "2")
    with pytest.raises(ValueError, match="TRNCORETEST_REQUIRE_NKI='2'"):
        config.read_bool("trncoretest", "REQUIRE_NKI")


def test_variable_set_restores_the_previous_state(monkeypatch):
    name = "TRNCORE_TEST_SCOPED"
    monkeypatch.delenv(name, raising=False)
    with config.variable_set(name, "a"):
        assert os.environ[name] == "a"
    assert name not in os.environ
    monkeypatch.setenv(name, "b")
    with config.variable_set(name, "c"):
        assert os.environ[name] == "c"
    assert os.environ[name] == "b"
