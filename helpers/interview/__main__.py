"""``python -m helpers.interview cards [OUT.html]``: write the printable answer cards (``make cards``)."""

from __future__ import annotations

import sys
from pathlib import Path

from . import cards, cards_html


def main(argv: list[str]) -> int:
    if not argv or argv[0] != "cards" or len(argv) > 2:
        print("usage: python -m helpers.interview cards [OUT.html]", file=sys.stderr)
        return 2
    out = Path(argv[1] if len(argv) == 2 else "build/interview-cards.html")
    out.parent.mkdir(parents=True, exist_ok=True)
    out.write_text(cards_html(), encoding="utf-8")
    print(f"{out}: {len(cards())} answer cards")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
