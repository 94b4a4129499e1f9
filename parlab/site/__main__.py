"""``python -m parlab.site build [OUT]`` builds the static site (default ``site/``);
``python -m parlab.site check [OUT]`` checks its links; ``serve`` is ``python -m http.server``.
A refusal (OUT is a file, or a folder the build did not make; not a built site) is one line on
stderr and exit status 2; broken links are exit status 1."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m parlab.site", description=__doc__)
    parser.add_argument("command", choices=("build", "check"))
    parser.add_argument("out", nargs="?", default=str(ROOT / "site"), help="the site folder (default: site/)")
    args = parser.parse_args(argv)
    out = Path(args.out)
    if args.command == "build":
        from .build import build

        try:
            report = build(ROOT, out)
        except RuntimeError as err:  # the build's refusals: the output folder, npm, a pin, a broken link
            print(err, file=sys.stderr)
            return 2
        print(report)
        print(f"serve it: python -m http.server -d {args.out} (then open http://localhost:8000/)")
        return 0
    from .linkcheck import check

    try:
        broken, links = check(out)
    except ValueError as err:
        print(err, file=sys.stderr)
        return 2
    for b in broken:
        print(b)
    print(f"{links} links checked in {out}, {len(broken)} broken")
    return 1 if broken else 0


if __name__ == "__main__":
    sys.exit(main())
