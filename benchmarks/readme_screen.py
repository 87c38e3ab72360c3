"""The README's first screen: the explorer at 100x36 on traces/demo-eager-sync.decode.json.gz, as plain text.

    python3 benchmarks/readme_screen.py            # prints it; --write puts it into README.md and tests/readme_screen.txt
"""

from __future__ import annotations

import asyncio
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from gapscope.tui.app import GapscopeApp  # noqa: E402
from gapscope.tui.textdump import screen_text  # noqa: E402

TRACE = ROOT / "traces" / "demo-eager-sync.decode.json.gz"


async def _grab() -> str:
    app = GapscopeApp([str(TRACE)], load_opts={"no_cache": True})
    async with app.run_test(size=(100, 36)) as pilot:
        for _ in range(3):
            await app.workers.wait_for_complete()
            await pilot.pause()
        return screen_text(app)


def main() -> int:
    text = asyncio.run(_grab())
    if "--write" in sys.argv:
        (ROOT / "tests" / "readme_screen.txt").write_text(text + "\n")
        readme = (ROOT / "README.md").read_text()
        new = re.sub(r"(\n```\n)gapscope │.*?(\n```\n)", lambda m: m.group(1) + text + m.group(2), readme, count=1,
                     flags=re.S)
        (ROOT / "README.md").write_text(new)
    print(text)
    return 0


if __name__ == "__main__":
    sys.exit(main())
