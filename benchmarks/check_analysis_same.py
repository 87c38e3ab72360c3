"""Dump what the analysis produces, to compare two trees byte for byte. Run by hand:

    python benchmarks/check_analysis_same.py OUT_DIR [--repo DIR] [TRACE...]

For every trace (default: traces/*.json.gz of this repository plus /tmp/gapscope-bench/big_100M.json when it
exists) it writes into OUT_DIR:

  NAME.md          the Markdown report (what `python -m gapscope report TRACE` prints)
  NAME.json        the JSON report (what `python -m gapscope report --json TRACE` prints)
  NAME.details     repr() of ``a.gap_detail(i)`` for the first 200 gaps, from a fresh ``analyze(model)`` (so the
                   details come from ``gap_detail`` alone, not from the findings having computed them)

plus ``ranks-*.md`` / ``.json`` for the rank pairs in traces/ (``analyze_ranks``, whose job gives each rank the
late-rank note as it is analysed). ``--repo DIR`` imports ``tui`` from another checkout (e.g. a pristine
``git archive HEAD | tar -x -C /tmp/analysis-before``), so a before / after is:

    python benchmarks/check_analysis_same.py /tmp/same-before --repo /tmp/analysis-before
    python benchmarks/check_analysis_same.py /tmp/same-after
    diff -r /tmp/same-before /tmp/same-after && echo IDENTICAL

Traces are loaded with ``no_cache=True`` so the two trees never share a cache entry.
"""

from __future__ import annotations

import argparse
import glob
import os
import sys
import time

HERE = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BIG = "/tmp/gapscope-bench/big_100M.json"


def main() -> int:
    ap = argparse.ArgumentParser()
    ap.add_argument("out")
    ap.add_argument("--repo", default=HERE, help="checkout whose tui package is used (default: this one)")
    ap.add_argument("--details", type=int, default=200, help="gap_detail dumps per trace")
    ap.add_argument("traces", nargs="*")
    args = ap.parse_args()
    sys.path.insert(0, os.path.abspath(args.repo))
    import gapscope.tui as tui

    assert os.path.abspath(os.path.dirname(os.path.dirname(tui.__file__))) == os.path.abspath(args.repo), tui.__file__
    from gapscope.analysis import analyze
    from gapscope.analysis.ranks import analyze_ranks
    from gapscope.report import render_markdown, to_json_text
    from gapscope.commands.report import DEFAULT_TOP_JSON, DEFAULT_TOP_MARKDOWN
    from gapscope.trace import load

    traces = args.traces or sorted(glob.glob(os.path.join(HERE, "traces", "*.json.gz")))
    if not args.traces and os.path.exists(BIG):
        traces.append(BIG)
    os.makedirs(args.out, exist_ok=True)

    def write(name, text):
        with open(os.path.join(args.out, name), "w", encoding="utf-8") as f:
            f.write(text)

    for path in traces:
        t = time.perf_counter()
        name = os.path.basename(path)
        m = load(path, no_cache=True)
        a = analyze(m)
        write(name + ".md", render_markdown([a], DEFAULT_TOP_MARKDOWN))
        write(name + ".json", to_json_text([a], top=DEFAULT_TOP_JSON))
        fresh = analyze(m)
        n = min(len(fresh.gaps), args.details)
        write(name + ".details", "".join(f"{i}: {fresh.gap_detail(i)!r}\n" for i in range(n)))
        print(f"{name}: {len(a.gaps)} gaps, {len(a.findings)} findings, {time.perf_counter() - t:.1f} s", flush=True)

    if not args.traces:
        for ranks in sorted(glob.glob(os.path.join(HERE, "traces", "*.ranks.json"))):
            stem = os.path.basename(ranks)[: -len(".ranks.json")]
            files = sorted(glob.glob(os.path.join(HERE, "traces", stem + ".decode.rank*.json.gz")))
            if len(files) < 2:
                continue
            out = analyze_ranks([load(p, no_cache=True) for p in files])
            write(f"ranks-{stem}.md", render_markdown(out, DEFAULT_TOP_MARKDOWN))
            write(f"ranks-{stem}.json", to_json_text(out, top=DEFAULT_TOP_JSON))
            print(f"ranks {stem}: {len(files)} ranks", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
