"""grader/isolation.py: the three isolation strategies, the one the machine allows, and the places
that describe them (the README's table, the doctor, the report) reading the same objects."""

import pytest

from coursekit.impl import REPO_ROOT
from grader import doctor, isolation


def test_the_readme_table_is_the_strategies_own():
    table = isolation.protection_table()
    readme = (REPO_ROOT / "README.md").read_text(encoding="utf-8")
    assert table in readme, (
        "README.md's protection table is not grader.isolation.protection_table(); "
        "paste its output in the threat model's Sandbox section:\n" + table
    )


@pytest.mark.parametrize("allowed", [(True, True), (False, True), (False, False)])
def test_the_strongest_strategy_allowed_is_used_and_reported(monkeypatch, allowed):
    """Namespaces where they can be made, else a separate user where root can drop to one, else
    none; the doctor names the one used, and an off protection is never reported on."""
    namespaces, user = allowed
    monkeypatch.setattr(isolation.Namespaces, "available", classmethod(lambda cls: namespaces))
    monkeypatch.setattr(isolation.SeparateUser, "available", classmethod(lambda cls: user))
    expected = isolation.Namespaces if namespaces else isolation.SeparateUser if user else isolation.Unisolated
    strategy = isolation.current()
    assert type(strategy) is expected
    assert strategy.complete == (expected is isolation.Namespaces)
    shown = isolation.protections()
    assert list(shown) == list(isolation.PROTECTIONS)
    assert all(shown[p] == (p in strategy.gives) for p in isolation.PROTECTIONS if p not in isolation.ALWAYS)
    [(name, state, line)] = [found for found in doctor.report() if found[0] == "sandbox"]
    assert name == "sandbox" and f"isolation: {strategy.name}" in line, line
    assert state == (doctor.OK if namespaces and isolation.has_prlimit() else doctor.OFF), (state, line)
    for off in (p for p, on in shown.items() if not on):
        assert f"off: {off}" in line or f", {off}" in line.split("; on:")[0], (off, line)


def test_namespaces_give_every_protection_and_the_others_fewer():
    every = set(isolation.PROTECTIONS) - set(isolation.ALWAYS)
    assert set(isolation.Namespaces.gives) == every
    assert set(isolation.SeparateUser.gives) == {isolation.OWN_USER}
    assert isolation.Unisolated.gives == ()
