"""A multi-rank tab's summary per rank, for the header's ranks line (panels.ranks_line)."""

from __future__ import annotations


def rank_summary(scene) -> list[dict]:
    """Per rank of a multi-rank tab, in rank order: ``rank``, ``idle_pct`` (None: no GPU work or not analysed
    yet), ``analysed``, ``wait_ns`` (collective wait for other ranks) and ``wait_for`` (the rank it waited
    for most), ``skew`` (that wait is profiler start-up skew), ``late`` ((arrived last, of, frame) when
    the cross-rank analysis names this rank late at half its collectives or more, else None)."""
    out = []
    for pi, pt in enumerate(scene.parts):
        a = pt.analysis
        rank = pt.model.rank if pt.model.rank is not None else pi
        e = {"rank": rank, "idle_pct": None, "analysed": a is not None, "wait_ns": 0, "wait_for": None,
             "skew": False, "late": None}
        out.append(e)
        full = pt.state.analysis  # the full analysis (ready, or its findings being built); None for a preview
        if full is None:
            continue
        if full.devices:
            e["idle_pct"] = float(full.idle_pct)
        rm = full.cross_rank  # ranks.RankMatch
        if rm is None:
            continue
        st = rm.stats(rank)
        if st is not None and (st.wait_ns or st.startup_wait_ns):
            e["wait_ns"] = int(st.wait_ns or st.startup_wait_ns)
            e["wait_for"] = st.wait_for if st.wait_ns else (rm.startup.late_rank if rm.startup else None)
            e["skew"] = not st.wait_ns  # all of it profiler start-up skew
        le = rm.late_rank(rank)
        if le is not None and le.count and 2 * le.count >= max(le.of, 1):
            b = (le.blamed or [None])[0]
            e["late"] = (int(le.count), int(le.of), b.func if b else None)
    return out
