"""nccl-tests ``-J`` JSON output (placeholder until implemented)."""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterable, Sequence

from ._lines import Line
from ._model import Run

NAME = "nccl-tests-json"


def sniff(head: Sequence[Line]) -> bool:
    return False


def parse(lines: Iterable[Line], source: str) -> tuple[list[Run], Counter[str]]:
    raise NotImplementedError
