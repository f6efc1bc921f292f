"""A section of a Markdown page that a script generates between two markers: printed, written, or checked."""

import argparse
import sys
from collections.abc import Callable
from pathlib import Path


def replaced(text: str, begin: str, end: str, inner: str) -> str:
    """The page's text with what lies between the markers replaced by `inner`."""
    start, stop = text.index(begin), text.index(end) + len(end)
    return f"{text[:start]}{begin}\n{inner}\n{end}{text[stop:]}"


def main(page: Path, begin: str, end: str, make: Callable[[], str], doc: str) -> int:
    """The command line every such script has: print the section, `--write` it into the page, or `--check` it."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    mode = parser.add_mutually_exclusive_group()
    mode.add_argument("--write", action="store_true")
    mode.add_argument("--check", action="store_true")
    args = parser.parse_args()
    inner = make()
    text = page.read_text(encoding="utf-8")
    if args.write:
        page.write_text(replaced(text, begin, end, inner), encoding="utf-8")
    elif args.check and replaced(text, begin, end, inner) != text:
        print(inner)
        script = Path(sys.argv[0]).name
        print(f"{page.name}'s generated section is stale: run python scripts/{script} --write", file=sys.stderr)
        return 1
    elif not args.check:
        print(inner)
    return 0
