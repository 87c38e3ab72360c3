"""``gapscope report TRACE... [--json] [--top N] [--all] [-o FILE] [--force] [--whole-trace] [--schema]``."""

from __future__ import annotations

import sys

from ..errors import GapscopeError
from .common import add_trace_args

NAME = "report"
HELP = "write the findings report (Markdown, or JSON with --json)"

#: what --top means when it is not given: 10 for Markdown (a person reads it), 50 gaps for --json
DEFAULT_TOP_MARKDOWN = 10
DEFAULT_TOP_JSON = 50


def add_parser(sub) -> None:
    p = sub.add_parser(NAME, help=HELP)
    add_trace_args(p)
    p.add_argument("--json", action="store_true", help="JSON following findings.schema.json")
    p.add_argument("--schema", action="store_true",
                   help="print the JSON report's schema (the contract shipped in the package) and exit")
    p.add_argument("--top", type=int, default=None, metavar="N",
                   help=f"gaps, kernels and findings to list (default {DEFAULT_TOP_MARKDOWN}; "
                        f"{DEFAULT_TOP_JSON} gaps with --json)")
    p.add_argument("--all", action="store_true",
                   help="everything in full: every action of the plan, the minor ones (under 1%% of the step) too, "
                        "every finding's evidence (by default an action's first finding in full, the others one line "
                        "each) and every listed gap's stacks (by default the largest gap's)")
    p.add_argument("--whole-trace", action="store_true",
                   help="analyse the whole trace, not only the measured gapscope.step ranges of a gapscope capture")
    p.add_argument("-o", "--output", metavar="FILE",
                   help="write to FILE instead of stdout (never overwrites unless --force)")
    p.add_argument("--force", action="store_true", help="allow -o to replace an existing file")


def analyses_for(paths, args) -> list:
    """The analyses of the traces named: one job's ranks together, any others one each (diagnosis.analyse).
    The analysis' modules are imported after the load has started (``_import_analysis``), never before it."""
    from ..trace.multi import load_many

    models = load_many(paths, no_cache=bool(getattr(args, "no_cache", False)), max_size=getattr(args, "max_size", None),
                       idle=_import_analysis)
    # window: "steps" (the measured gapscope.step#k ranges, the default) or "all" (a --whole-trace flag)
    window = "all" if getattr(args, "whole_trace", False) else "steps"
    from ..analysis.diagnosis import analyse  # (imported by now when the loader waited for its worker)

    # a second core for the analysis and its projection (forked children: this process runs no other thread)
    return analyse(models, window=window, parallel=True)


def _import_analysis() -> None:
    """The analysis' and the report's modules (~50 ms of imports), while the loader waits for its worker's part
    of a big trace (``load_many``'s ``idle``): then they cost no time of their own."""
    from .. import report  # noqa: F401
    from ..analysis import diagnosis, plan, replay, verdict  # noqa: F401


def report_top(args) -> int:
    """The number of gaps/kernels/findings to list: ``--top N`` as given, else 10 for Markdown and 50 for JSON."""
    top = getattr(args, "top", None)
    if top is None:
        return DEFAULT_TOP_JSON if getattr(args, "json", False) else DEFAULT_TOP_MARKDOWN
    if top < 1:
        raise GapscopeError("--top must be a positive number")
    return top


def run(args) -> int:
    if getattr(args, "schema", False):
        from ..report import schema_text

        sys.stdout.write(schema_text())
        return 0
    top = report_top(args)
    # the analysis' and the report's modules only once the load is under way: a big trace's load imports them
    # while it waits for its worker's part (``_import_analysis``), which it cannot once they are in
    analyses = analyses_for(args.traces, args)
    from ..analysis.diagnosis import diagnose
    from ..report import render_markdown, to_json_text

    diagnosis = diagnose(analyses)
    text = to_json_text(diagnosis, top=top) if args.json else render_markdown(diagnosis, top,
                                                                               minor=bool(getattr(args, "all", False)))
    out = getattr(args, "output", None)
    if out:
        from ..fsutil import atomic_write_text

        atomic_write_text(out, text, overwrite=bool(getattr(args, "force", False)))
        sys.stderr.write(f"gapscope: wrote {out}\n")
    else:
        sys.stdout.write(text)
        sys.stdout.flush()
    return 0
