"""The garbage-collector tuning extension: what it changes, and that it undoes it."""

from __future__ import annotations

import gc

import pytest
from scrapy.utils.test import get_crawler

from productcrawler.run.gc_tuning import GC_GEN0_THRESHOLD, GcTuning


@pytest.fixture
def restore_gc():
    thresholds = gc.get_threshold()
    yield
    gc.unfreeze()
    gc.set_threshold(*thresholds)


def build(**settings: object) -> GcTuning:
    return GcTuning.from_crawler(get_crawler(settings_dict=settings))


def test_freezes_start_up_objects_and_raises_the_young_threshold_while_open(restore_gc):
    before = gc.get_threshold()
    extension = build()
    start_up_object = [["built before the spider opens"]]  # a container: tracked by the collector
    tracked = len(gc.get_objects())
    extension.spider_opened()
    # Frozen: moved out of the collected generations, so no collection walks them again.
    assert gc.get_freeze_count() >= tracked * 0.9
    assert not any(o is start_up_object for o in gc.get_objects())
    assert gc.get_threshold() == (GC_GEN0_THRESHOLD, *before[1:])
    extension.spider_closed()
    assert gc.get_freeze_count() == 0
    assert any(o is start_up_object for o in gc.get_objects())
    assert gc.get_threshold() == before


def test_threshold_zero_keeps_pythons_thresholds(restore_gc):
    before = gc.get_threshold()
    extension = build(GC_GEN0_THRESHOLD=0)
    extension.spider_opened()
    assert gc.get_threshold() == before
    assert gc.get_freeze_count() > 0
    extension.spider_closed()


@pytest.mark.parametrize("value", ["-1", "many", "1.5"])
def test_a_bad_threshold_is_refused_by_name(value):
    with pytest.raises(ValueError, match=f"GC_GEN0_THRESHOLD={value!r}"):
        build(GC_GEN0_THRESHOLD=value)
