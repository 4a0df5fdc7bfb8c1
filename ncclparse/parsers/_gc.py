"""Rarer young-generation garbage collections while a source is parsed."""

from __future__ import annotations

import gc
import threading
from collections.abc import Iterator
from contextlib import contextmanager

# A parse makes and drops millions of small containers (row dicts, tuples, Line and
# Run objects) that form no reference cycles. CPython collects the young generation
# every 700 net container allocations and the whole heap every 100 young collections
# or so, each walking what is alive, such as the rows waiting to become columns: on a
# log of many short runs that was ~5 % of a parse's CPU. Every YOUNG_THRESHOLD
# allocations instead, as long as a parse goes on; the older generations' thresholds
# (counted in young collections) are kept.
YOUNG_THRESHOLD = 10_000

_lock = threading.Lock()
_parses = 0  # parses going on in this process (threads may parse at once)
_saved: tuple[int, int, int] | None = None  # the thresholds before the first


@contextmanager
def rarer_collections() -> Iterator[None]:
    """Collect the young generation every YOUNG_THRESHOLD allocations until the last
    parse going on ends, then restore the thresholds, unless something else changed
    them meanwhile (its setting is kept). A threshold of 0 (collection off) or above
    YOUNG_THRESHOLD is left as it is."""
    global _parses, _saved
    with _lock:
        if _parses == 0:
            before = gc.get_threshold()
            if 0 < before[0] < YOUNG_THRESHOLD:
                _saved = before
                gc.set_threshold(YOUNG_THRESHOLD, before[1], before[2])
        _parses += 1
    try:
        yield
    finally:
        with _lock:
            _parses -= 1
            if _parses == 0 and _saved is not None:
                if gc.get_threshold() == (YOUNG_THRESHOLD, *_saved[1:]):
                    gc.set_threshold(*_saved)
                _saved = None
