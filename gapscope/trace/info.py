"""``gapscope info TRACE... [--json]``: what a trace holds, without judging it.

Events per category, devices, streams, CPU threads, window length, versions, rank, the capture's own
metadata and the loader's warnings. Text output is aligned and ASCII-safe (trace strings are escaped).
"""

from __future__ import annotations

import sys

import numpy as np

from .model import Kind, TraceModel, TrackKind

try:
    import orjson as _orjson
except ImportError:  # pragma: no cover
    _orjson = None
import json as _json

_VERSION_KEYS = ("schemaVersion", "cuda_runtime_version", "cuda_driver_version", "cupti_version",
                 "hip_runtime_version", "hip_driver_version", "roctracer_version", "torch_version",
                 "pytorch_version")


def ascii_safe(s, limit: int = 200) -> str:
    """Printable ASCII: control characters, ANSI escapes and non-ASCII become escapes; long text is cut."""
    s = str(s)
    if len(s) > limit:
        s = s[: limit - 3] + "..."
    if s.isascii() and s.isprintable():  # the common case, without a pass per character
        return s
    out = s.encode("ascii", "backslashreplace").decode("ascii")
    return "".join(ch if 32 <= ord(ch) < 127 else f"\\x{ord(ch):02x}" for ch in out)


def _fmt_ns(ns: int) -> str:
    ns = int(ns)
    if ns >= 1_000_000_000:
        return f"{ns / 1e9:.3f} s"
    if ns >= 1_000_000:
        return f"{ns / 1e6:.3f} ms"
    if ns >= 1_000:
        return f"{ns / 1e3:.3f} us"
    return f"{ns} ns"


def _fmt_bytes(n) -> str:
    try:
        n = float(n)
    except (TypeError, ValueError):
        return "?"
    for unit in ("GiB", "MiB", "KiB"):
        div = {"GiB": 2**30, "MiB": 2**20, "KiB": 2**10}[unit]
        if n >= div:
            return f"{n / div:.1f} {unit}"
    return f"{int(n)} B"


def summary(model: TraceModel) -> dict:
    """Everything ``info`` prints, as plain JSON-able data."""
    kinds = np.bincount(model.kind, minlength=len(Kind)) if model.n else np.zeros(len(Kind), np.int64)
    t0, t1 = model.window_ns()
    devices = []
    for p in model.devices:
        if isinstance(p, dict):
            devices.append({
                "id": p.get("id"),
                "name": p.get("name"),
                "sms": p.get("numSms"),
                "memory_bytes": p.get("totalGlobalMem"),
                "compute": (f"{p.get('computeMajor')}.{p.get('computeMinor')}"
                            if p.get("computeMajor") is not None else None),
            })
    streams = []
    threads = []
    other = []
    for t in model.tracks:
        sl = model.track_slice(t.id)
        cnt = sl.stop - sl.start
        if t.kind is TrackKind.GPU:
            busy = int(model.dur_ns[sl][np.isin(model.kind[sl], [Kind.KERNEL, Kind.MEMCPY, Kind.MEMSET])].sum())
            streams.append({"device": t.device, "stream": t.stream, "events": cnt, "busy_ns": busy, "name": t.name})
        elif t.kind is TrackKind.CPU:
            threads.append({"pid": t.pid, "tid": t.tid, "name": t.name, "events": cnt})
        else:
            other.append({"pid": t.pid, "tid": t.tid, "name": t.name, "events": cnt})
    meta = model.metadata
    versions = {}
    g = model.gapscope_meta or {}
    for k in ("torch", "cuda", "python"):  # written by gapscope's capture; Kineto does not record them
        if isinstance(g.get(k), (str, int, float)):
            versions[k] = g[k]
    versions.update({k: meta[k] for k in _VERSION_KEYS if k in meta})
    flags = [k for k in ("record_shapes", "with_stack", "profile_memory", "with_flops", "with_modules")
             if meta.get(k) in (1, True)]
    return {
        "path": model.path,
        "events": model.n,
        "events_by_kind": {k.name.lower(): int(kinds[k]) for k in Kind if int(kinds[k])},
        "events_by_category": dict(sorted(model.category_counts.items(), key=lambda x: (-x[1], x[0]))),
        "window_ns": [t0, t1],
        "window_length_ns": t1 - t0,
        "devices": devices,
        "streams": streams,
        "cpu_threads": threads,
        "other_tracks": other,
        "versions": versions,
        "flags": flags,
        "rank": model.rank,
        "distributed": model.distributed,
        "gapscope": model.gapscope_meta,
        "names": len(model.names),
        "warnings": list(model.warnings),
    }


def format_text(s: dict) -> str:
    lines = [f"trace     {ascii_safe(s['path'], 400)}"]
    lines.append(f"events    {s['events']:,}")
    lines.append(f"window    {_fmt_ns(s['window_length_ns'])}")
    if s["rank"] is not None:
        d = s["distributed"] or {}
        ws = d.get("world_size")
        lines.append(f"rank      {s['rank']}" + (f" of {ws}" if ws is not None else ""))
    if s["versions"]:
        lines.append("versions  " + ", ".join(f"{k}={ascii_safe(v, 40)}" for k, v in s["versions"].items()))
    if s["flags"]:
        lines.append("recorded  " + ", ".join(s["flags"]))

    def table(title, rows, header):
        if not rows:
            return
        lines.append("")
        lines.append(title)
        cells = [header] + [[ascii_safe(c, 80) for c in r] for r in rows]
        widths = [max(len(r[i]) for r in cells) for i in range(len(header))]
        # numbers (with a unit or not) right-aligned, text left-aligned: decided once per column
        right = [all(x[i][:1].isdigit() or x[i] in ("-", "") for x in cells[1:]) for i in range(len(header))]
        for r in cells:
            parts = [c.rjust(widths[i]) if right[i] else c.ljust(widths[i]) for i, c in enumerate(r)]
            lines.append("  " + "  ".join(parts).rstrip())

    table("events by category", [[c, f"{k:,}"] for c, k in s["events_by_category"].items()], ["category", "count"])
    table("devices", [[str(d["id"]), str(d["name"]), str(d["sms"] if d["sms"] is not None else "-"),
                       _fmt_bytes(d["memory_bytes"]) if d["memory_bytes"] is not None else "-",
                       d["compute"] or "-"] for d in s["devices"]],
          ["id", "name", "SMs", "memory", "compute"])
    table("GPU streams", [[str(x["device"]), str(x["stream"]), f"{x['events']:,}", _fmt_ns(x["busy_ns"])]
                          for x in s["streams"]], ["device", "stream", "events", "busy"])
    table("CPU threads", [[str(x["pid"]), str(x["tid"]), x["name"], f"{x['events']:,}"] for x in s["cpu_threads"]],
          ["pid", "tid", "name", "events"])
    if s["other_tracks"]:
        table("other tracks", [[x["name"], f"{x['events']:,}"] for x in s["other_tracks"]], ["track", "events"])
    if s["gapscope"]:
        lines.append("")
        lines.append("capture metadata (gapscope)")
        g = s["gapscope"]
        w = max(len(ascii_safe(k, 40)) for k in g) if g else 0
        for k, v in g.items():
            val = v if isinstance(v, str) else _json.dumps(v, default=str)
            lines.append(f"  {ascii_safe(k, 40).ljust(w)}  {ascii_safe(val, 120)}")
    lines.append("")
    if s["warnings"]:
        lines.append("warnings")
        for w in s["warnings"]:
            lines.append(f"  - {ascii_safe(w, 300)}")
    else:
        lines.append("warnings  none")
    return "\n".join(lines) + "\n"


def run_info(args) -> int:
    from .multi import load_many

    models = load_many(list(args.traces), no_cache=getattr(args, "no_cache", False),
                       max_size=getattr(args, "max_size", None))
    sums = [summary(m) for m in models]
    out = sys.stdout
    if getattr(args, "json", False):
        payload = sums[0] if len(sums) == 1 else sums
        if _orjson is not None:
            out.write(_orjson.dumps(payload, option=_orjson.OPT_INDENT_2 | _orjson.OPT_NON_STR_KEYS,
                                    default=str).decode() + "\n")
        else:  # pragma: no cover
            out.write(_json.dumps(payload, indent=2, default=str) + "\n")
    else:
        out.write("\n".join(format_text(s) for s in sums))
    out.flush()
    return 0
