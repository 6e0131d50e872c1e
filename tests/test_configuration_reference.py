"""The configuration reference (docs/configuration.md) agrees with the code that reads the settings."""

from __future__ import annotations

from pathlib import Path

import pytest

from productcrawler.config import DEFAULTS
from productcrawler.config.reference import OUTSIDE_DEFAULTS, REFERENCE, TOPICS, markdown

ROOT = Path(__file__).resolve().parent.parent


def test_the_page_is_the_modules_output():
    page = (ROOT / "docs" / "configuration.md").read_text()
    assert page == markdown(), "regenerate: python -m productcrawler.config.reference > docs/configuration.md"


def test_every_setting_the_code_reads_is_described_once():
    described = [name for setting in REFERENCE for name in setting.names]
    assert len(described) == len(set(described)), "a setting described twice"
    assert set(described) == set(DEFAULTS) | set(OUTSIDE_DEFAULTS)
    assert {setting.topic for setting in REFERENCE} <= set(TOPICS)


def shown(value: object) -> str:
    if isinstance(value, bool):  # the page writes booleans as the settings take them: true, false
        return str(value).lower()
    return f"{value:g}" if isinstance(value, float) else str(value)


@pytest.mark.parametrize("setting", [s for s in REFERENCE if any(DEFAULTS.get(n) is not None for n in s.names)],
                         ids=lambda setting: setting.names[0])
def test_the_default_shown_is_the_codes(setting):
    for name in setting.names:
        assert shown(DEFAULTS[name]) in setting.default, (name, DEFAULTS[name], setting.default)


def test_a_setting_without_a_default_says_what_unset_means():
    for setting in REFERENCE:
        if all(DEFAULTS.get(name) is None for name in setting.names):
            assert setting.default.strip(), setting.names
