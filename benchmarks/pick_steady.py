"""Per trace name, the attempt whose un-profiled timing was steadiest (benchmarks/record_steady.sh).

    python3 benchmarks/pick_steady.py DIR [--out DEST]

DIR holds a1/, a2/, ... (one capture of every what-if trace each). For every trace name the attempt with the
smallest p75/p25 of its un-profiled samples wins (ties: the earlier attempt); its file is copied to DEST when
given. The choice reads only the capture's timing metadata, never a projection, so it cannot favour the model.
Prints one line per trace: every attempt's p75/p25 and median per step, and the pick. Standard library only.
"""

from __future__ import annotations

import argparse
import gzip
import json
import shutil
import sys
from pathlib import Path


def _timing(path: Path):
    g = json.loads(gzip.decompress(path.read_bytes())).get("gapscope") or {}
    u = g.get("unprofiled") or {}
    steps = int(g.get("active") or 1)
    return float(u["p75_us"]) / float(u["p25_us"]), float(u["median_us"]) / steps / 1e3, bool(g.get("timing_noisy"))


def main(argv=None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("dir")
    ap.add_argument("--out")
    args = ap.parse_args(argv)
    root = Path(args.dir)
    attempts = sorted((p for p in root.iterdir() if p.is_dir() and p.name[:1] == "a" and p.name[1:].isdigit()),
                      key=lambda p: int(p.name[1:]))
    if not attempts:
        print(f"pick_steady: error: {root}: no a1/, a2/, ... folders", file=sys.stderr)
        return 2
    names = sorted({f.name for a in attempts for f in a.glob("*.json.gz")})
    dest = Path(args.out) if args.out else None
    if dest:
        dest.mkdir(parents=True, exist_ok=True)
    print("| trace | " + " | ".join(f"{a.name}: p75/p25, median ms/step" for a in attempts) + " | picked |")
    print("|---|" + "---|" * len(attempts) + "---|")
    for n in names:
        cells, best = [], None
        for a in attempts:
            f = a / n
            if not f.exists():
                cells.append("–")
                continue
            iqr, med, noisy = _timing(f)
            cells.append(f"{iqr:.3f}, {med:.2f}{' (noisy)' if noisy else ''}")
            if best is None or iqr < best[0]:
                best = (iqr, a, f)
        print(f"| {n[:-8]} | " + " | ".join(cells) + f" | {best[1].name if best else '–'} |")
        if dest and best:
            shutil.copyfile(best[2], dest / n)
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
