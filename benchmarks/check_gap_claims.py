"""Independent check (stdlib + the gapscope CLI for the claims): for each gap in `gapscope report --json`, recompute the claimed frame's time from the raw events.

Prints gaps where "Python `X` held the CPU for A µs" differs from X's time in the interval [gap start, launch of the
next kernel] on the launching thread: own = X is the innermost event; py = X is the innermost Python frame
(ops and runtime calls below it included)."""
import collections, gzip, json, re, subprocess, sys

# usage: python3 benchmarks/check_gap_claims.py TRACE [-v]
path = sys.argv[1]
rep = json.loads(subprocess.run([sys.executable, '-m', 'tui', 'report', '--json', '--top', '50', path], capture_output=True, text=True).stdout)
doc = json.loads(gzip.decompress(open(path, 'rb').read()))
ev = [e for e in doc['traceEvents'] if e.get('ph') == 'X']
gpu = sorted([e for e in ev if e.get('cat') in ('kernel', 'gpu_memcpy', 'gpu_memset')], key=lambda e: e['ts'])
rt = {e['args']['correlation']: e for e in ev if e.get('cat') in ('cuda_runtime', 'cuda_driver') and 'correlation' in (e.get('args') or {})}
cpu_by_tid = collections.defaultdict(list)
for e in ev:
    if e.get('cat') in ('cpu_op', 'python_function', 'user_annotation', 'cuda_runtime', 'cuda_driver'):
        cpu_by_tid[e['tid']].append(e)
kern = [g for g in gpu if g.get('cat') == 'kernel']
# compute-idle gaps (kernels only, as "kernels busy")
gaps = []
end = None
for g in kern:
    if end is not None and g['ts'] > end:
        gaps.append((end, g['ts'], g))
    end = g['ts'] + g['dur'] if end is None else max(end, g['ts'] + g['dur'])
bydur = collections.defaultdict(list)
for a, b, g in gaps:
    bydur[round(b - a, 1)].append((a, b, g))
pat = re.compile(r"Python `([^`]+)`.*? held the CPU for ([\d.]+) (µs|ms) of the ([\d.]+) (µs|ms)")
n = bad = 0
for gp in rep['gaps']:
    m = pat.search(gp['explanation'])
    if not m:
        continue
    frame, claim = m.group(1), float(m.group(2)) * (1000 if m.group(3) == 'ms' else 1)
    cands = bydur.get(round(gp['dur_us'], 1)) or bydur.get(round(gp['dur_us'] + 0.1, 1)) or bydur.get(round(gp['dur_us'] - 0.1, 1))
    want = (gp.get('next_op') or {}).get('kernel')
    cands = [c for c in (cands or []) if want is None or c[2]['name'] == want]
    if len(cands) != 1:
        print(f"? gap {gp['dur_us']:.1f} us: {len(cands)} raw gaps of that length and next kernel; skipped"); continue
    a, b, g = cands[0]
    L = rt.get(g['args'].get('correlation'))
    if L is None:
        continue
    lo, hi = a, max(a, L['ts'])
    act = [e for e in cpu_by_tid[L['tid']] if e['ts'] < hi and e['ts'] + e['dur'] > lo]
    pts = sorted({lo, hi} | {min(hi, max(lo, e['ts'])) for e in act} | {min(hi, max(lo, e['ts'] + e['dur'])) for e in act})
    own = py = 0.0
    ownby = collections.Counter()
    for x0, x1 in zip(pts, pts[1:]):
        if x1 <= x0:
            continue
        mid = (x0 + x1) / 2
        on = [e for e in act if e['ts'] <= mid < e['ts'] + e['dur']]
        if not on:
            continue
        inner = max(on, key=lambda e: (e['ts'], -e['dur']))
        ownby[inner['name']] += x1 - x0
        pys = [e for e in on if e['cat'] == 'python_function']
        ip = max(pys, key=lambda e: (e['ts'], -e['dur'])) if pys else None
        def hit(e):
            nm = e['name']
            return nm == frame or nm.startswith(f"<built-in method {frame} ") or nm.startswith(f"<built-in function {frame}>")
        if hit(inner):
            own += x1 - x0
        if ip is not None and hit(ip):
            py += x1 - x0
    n += 1
    flag = claim > 1.5 * max(own, py) + 5
    bad += flag
    if flag or '-v' in sys.argv:
        top = ", ".join(f"{k[:60]} {v:.0f}" for k, v in ownby.most_common(3))
        print(f"{'WRONG' if flag else 'ok   '} gap {gp['dur_us']:7.1f} us ({gp['cause']}): claims `{frame[:70]}` {claim:.1f} us; raw own {own:.1f}, as innermost Python frame {py:.1f}; top own: {top}")
print(f"{path}: {n} 'held the CPU' claims checked, {bad} over 1.5x the frame's time")
