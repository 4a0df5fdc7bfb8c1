"""While a source is parsed, the young generation is collected every
``_gc.YOUNG_THRESHOLD`` allocations (not 700); the thresholds are restored after."""

from __future__ import annotations

import gc
import io
from collections.abc import Iterator

import pytest

from ncclparse.errors import UnknownLogFormatError
from ncclparse.parsers import Collector, Run, _gc, parse_source
from tests import _derive as derive


@pytest.fixture(autouse=True)
def thresholds() -> Iterator[None]:
    before = gc.get_threshold()
    gc.set_threshold(700, 10, 10)
    yield
    gc.set_threshold(*before)


class Watching(Collector):
    """A Collector noting the thresholds in force as each run is added."""

    def __init__(self) -> None:
        super().__init__()
        self.seen: list[tuple[int, int, int]] = []

    def add_run(self, source: str, index: int, run: Run) -> None:
        self.seen.append(gc.get_threshold())
        super().add_run(source, index, run)


def test_a_parse_collects_less_often_and_restores_the_thresholds() -> None:
    collector = Watching()
    parse_source(collector, derive.HEALTHY, "healthy.log")
    assert collector.seen == [(_gc.YOUNG_THRESHOLD, 10, 10)]
    assert gc.get_threshold() == (700, 10, 10)
    assert collector.measurements_table().num_rows == 62


def test_the_thresholds_are_restored_when_a_parse_fails() -> None:
    with pytest.raises(UnknownLogFormatError):
        parse_source(Collector(), io.BytesIO(b"no benchmark here\n"), "prose.txt")
    assert gc.get_threshold() == (700, 10, 10)


def test_parses_at_once_keep_the_threshold_until_the_last_ends() -> None:
    with _gc.rarer_collections():
        with _gc.rarer_collections():
            assert gc.get_threshold() == (_gc.YOUNG_THRESHOLD, 10, 10)
        assert gc.get_threshold() == (_gc.YOUNG_THRESHOLD, 10, 10)
    assert gc.get_threshold() == (700, 10, 10)


def test_a_setting_made_during_a_parse_is_kept() -> None:
    with _gc.rarer_collections():
        gc.set_threshold(2_000, 5, 5)
    assert gc.get_threshold() == (2_000, 5, 5)


@pytest.mark.parametrize("young", [0, 50_000], ids=["collection off", "already rarer"])
def test_a_threshold_of_zero_or_above_the_parses_is_left_alone(young: int) -> None:
    gc.set_threshold(young, 10, 10)
    with _gc.rarer_collections():
        assert gc.get_threshold() == (young, 10, 10)
    assert gc.get_threshold() == (young, 10, 10)
