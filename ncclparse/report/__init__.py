"""The report: one self-contained HTML page (or a Markdown summary) of parsed runs.

:func:`build_context` turns parsed and analysed tables into the typed page
(:mod:`~ncclparse.report.page`), with facts (:mod:`~ncclparse.report.facts`), charts
(:mod:`~ncclparse.report.plots` on :mod:`~ncclparse.report.figure`) and, for
``check --report``, the checks (:mod:`~ncclparse.report.checks`);
:func:`render_report` renders it with the templates.

>>> context = build_context(ncclparse.parse_many(["a.log"]))  # doctest: +SKIP
>>> html = render_report(context)                               # doctest: +SKIP
"""

from ncclparse.report.context import build_context
from ncclparse.report.page import ReportContext
from ncclparse.report.render import environment, render_markdown, render_report

__all__ = [
    "ReportContext",
    "build_context",
    "environment",
    "render_markdown",
    "render_report",
]
