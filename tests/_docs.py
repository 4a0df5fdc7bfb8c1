"""Code blocks of the docs, for the tests that run the documented recipes."""

from __future__ import annotations

import re
from pathlib import Path

DOCS = Path(__file__).parent.parent / "docs"


def code_block(doc: str, section: str, language: str) -> str:
    """The first ``language`` code block of the section of ``docs/<doc>`` headed
    ``### section`` (an AssertionError when that section has none)."""
    text = (DOCS / doc).read_text()
    start = text.index(f"\n### {section}\n")
    end = text.find("\n### ", start + 1)
    block = re.compile(rf"^```{language}\n(.*?)^```$", re.M | re.S).search(text, start)
    assert block is not None, f"docs/{doc}: no {language} block"
    assert end < 0 or block.start() < end, f"no {language} block under {section!r}"
    return block.group(1)
