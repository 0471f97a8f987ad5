"""Python source parsed one call at a time. CPython 3.11's parser keeps the depth it has recursed to in
state every thread shares: two threads parsing at once (a search's nodes read their scripts' literals
while others run) made it raise `SystemError: AST constructor recursion depth mismatch`, which killed a
ten-minute search and its resume. Every parse in cbr's process goes through here, under one lock."""

from __future__ import annotations

import ast
import threading

_ONE_AT_A_TIME = threading.Lock()


def parse(source: str) -> ast.Module:
    """`ast.parse(source)`, never beside another parse of cbr's."""
    with _ONE_AT_A_TIME:
        return ast.parse(source)
