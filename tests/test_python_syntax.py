"""Python source is parsed in cbr's process one call at a time (python_syntax.py): CPython 3.11's parser
shares its recursion depth between threads, and a search whose nodes read their scripts while others ran
died with `SystemError: AST constructor recursion depth mismatch`."""

from __future__ import annotations

import re
import threading
from pathlib import Path

from dsagent_cbr.python_syntax import parse

PACKAGE = Path(__file__).resolve().parents[1] / "dsagent_cbr"


def test_every_parse_in_cbr_s_process_goes_through_the_one_parser():
    """Code that runs in the sandbox (untrusted/) is another process; everything else parses here."""
    direct = [str(p.relative_to(PACKAGE)) for p in PACKAGE.rglob("*.py")
              if "untrusted" not in p.parts and p.name != "python_syntax.py"
              and re.search(r"\bast\.parse\(|compile\([^)]*PyCF_ONLY_AST", p.read_text(encoding="utf-8"))]
    assert direct == []


def test_threads_parse_side_by_side_without_a_system_error():
    code = "\n".join(f"def f{i}(a, b=[1, {{2: (3, 4)}}]):\n    return [x for x in a if x > b[0]]" for i in range(300))
    errors: list[BaseException] = []

    def work() -> None:
        try:
            for _ in range(20):
                assert len(parse(code).body) == 300
        except BaseException as exc:  # noqa: BLE001 - any failure fails the test
            errors.append(exc)

    threads = [threading.Thread(target=work) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    assert errors == []
