"""Render a report context into one self-contained HTML page or a Markdown summary.

The context types and how they are built from parsed and analysed tables live in
:mod:`ncclparse.report.context`; this module owns the Jinja environment (built once,
``autoescape=True``, ``StrictUndefined``: a misspelt variable is an error, not an empty
string) and the formatting filters templates use. Templates do no arithmetic.

>>> context = build_context(ncclparse.parse_many(["a.log"]))  # doctest: +SKIP
>>> html = render_report(context)                               # doctest: +SKIP
"""

from __future__ import annotations

import functools
import math
from pathlib import Path
from typing import Literal

import jinja2
from markupsafe import Markup

from ncclparse import formatting
from ncclparse.report.page import ReportContext

__all__ = [
    "environment",
    "markdown_text",
    "render_markdown",
    "render_report",
]

Format = Literal["html", "md"]

_TEMPLATES = {"html": "report.html", "md": "summary.md"}


def bandwidth_number(gbps: float | None) -> str:
    """A bandwidth in GB/s without its unit (the table header names it), with the two
    decimals nccl-tests prints: 158.86 -> "158.86", 0 -> "0.00"; above 0 and below
    0.01, "<0.01" (not "5e-07"); missing -> the en dash."""
    if gbps is None or math.isnan(gbps):
        return formatting.MISSING
    if 0 < gbps < 0.01:
        return "<0.01"
    return f"{gbps:.2f}"


def markdown_text(value: object) -> Markup:
    """Escape text from a log for Markdown: punctuation backslashed, one line.

    Returned as Markup so the HTML autoescape leaves it alone: the backslashes already
    make ``<script>`` literal text in any CommonMark renderer.
    """
    return Markup(formatting.markdown_escape(value))


def _shipped_templates() -> jinja2.BaseLoader:
    """Our templates: installed as ``ncclparse.templates``, or, in a source tree that is
    imported without being installed (an unpacked sdist running its tests), the
    top-level ``templates/`` beside the package."""
    try:
        return jinja2.PackageLoader("ncclparse.templates", "")
    except (ModuleNotFoundError, ValueError):
        return jinja2.FileSystemLoader(
            Path(__file__).resolve().parents[2] / "templates"
        )


@functools.cache
def environment(template_dir: Path | None = None) -> jinja2.Environment:
    """The Jinja environment: ``template_dir`` first (a site's own), then ours.

    Built once per directory. Filters: ``bytes``, ``time``, ``gbps``, ``percent``,
    ``count`` (:mod:`ncclparse.formatting`), ``bw`` (:func:`bandwidth_number`) and
    ``md`` (:func:`markdown_text`).
    """
    loaders: list[jinja2.BaseLoader] = []
    if template_dir is not None:
        loaders.append(jinja2.FileSystemLoader(template_dir))
    loaders.append(_shipped_templates())
    env = jinja2.Environment(
        loader=jinja2.ChoiceLoader(loaders),
        autoescape=True,
        undefined=jinja2.StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )
    env.filters.update(
        bytes=formatting.format_bytes,
        time=formatting.format_time_us,
        gbps=formatting.format_gbps,
        percent=formatting.format_percent,
        count=formatting.format_count,
        bw=bandwidth_number,
        md=markdown_text,
    )
    return env


def render_report(
    context: ReportContext,
    *,
    format: Format = "html",
    template_dir: Path | None = None,
) -> str:
    """Render ``context`` as the HTML page (``report.html``) or the Markdown summary.

    Raises jinja2.TemplateError (e.g. UndefinedError) for a broken template; those
    are bugs in the template, not bad input, so they keep their traceback.
    """
    template = environment(template_dir).get_template(_TEMPLATES[format])
    return template.render(report=context)


def render_markdown(context: ReportContext, *, template_dir: Path | None = None) -> str:
    """Render the short Markdown summary (verdicts, key numbers, worst gaps)."""
    return render_report(context, format="md", template_dir=template_dir)
