"""Errors a user can cause: the CLI prints their message as one sentence and exits non-zero."""

from __future__ import annotations


class CbrError(Exception):
    """A problem with the user's input or environment (bad folder, dead server, no model)."""

    exit_code = 2

    def __init__(self, message: str, *, details: list[str] | None = None) -> None:
        super().__init__(message)
        self.details = details or []
