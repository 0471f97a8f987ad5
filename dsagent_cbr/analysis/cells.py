"""What one cell gave back, read from the kernel's iopub messages.

The kernel runs untrusted code, so its messages are untrusted too: every field is read with a default
and turned into text, and what is kept is bounded (text by MAX_CHARS, head and tail, and rich outputs
such as images by MAX_RICH_CHARS), so that a cell printing without end cannot fill cbr's memory."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any

MAX_CHARS = 20_000  # of each text a cell gives back (stdout, stderr, result, error)
MAX_RICH_CHARS = 2 * 2**20  # of the rich outputs (images, html) a cell keeps for its notebook
# CSI sequences (colours, cursor moves) and the two-byte escapes: tracebacks come coloured
_ANSI = re.compile(r"\x1b\[[0-?]*[ -/]*[@-~]|\x1b[@-Z\\-_]")


def strip_ansi(text: str) -> str:
    return _ANSI.sub("", text)


def cut_note(count: int) -> str:
    return f"\n[... {count} characters cut ...]\n"


def capped(text: str, limit: int = MAX_CHARS) -> str:
    """`text` within `limit` characters: its head and its tail (where a traceback ends), saying how
    much was cut between them."""
    if len(text) <= limit:
        return text
    half = limit // 2
    return text[:half] + cut_note(len(text) - 2 * half) + text[-half:]


class Bounded:
    """Text that arrives in pieces, of which only the head and the tail are kept."""

    def __init__(self, limit: int = MAX_CHARS) -> None:
        self.half = limit // 2
        self.head = ""
        self.tail = ""
        self.total = 0

    def add(self, piece: str) -> None:
        self.total += len(piece)
        room = self.half - len(self.head)
        if room > 0:
            self.head += piece[:room]
            piece = piece[room:]
        if piece:
            self.tail = (self.tail + piece)[-self.half :]

    @property
    def text(self) -> str:
        cut = self.total - len(self.head) - len(self.tail)
        return self.head + (cut_note(cut) if cut else "") + self.tail


@dataclass
class CellResult:
    """One cell as the agent reads it: `result` is the text/plain of its value and displays, `error`
    the exception (name, value, traceback without colours), `outputs` the nbformat outputs kept for
    the notebook."""

    code: str
    ok: bool
    stdout: str = ""
    stderr: str = ""
    result: str = ""
    error: str | None = None
    timed_out: bool = False
    seconds: float = 0.0
    outputs: list[dict[str, Any]] = field(default_factory=list)
    # the kernel did not survive the cell (a limit, a crash): the state the cells built is gone
    kernel_died: bool = False


def _text(value: object) -> str:
    if isinstance(value, list):  # nbformat allows multiline strings as lists of lines
        return "".join(str(v) for v in value)
    return value if isinstance(value, str) else str(value)


def _value(mimetype: str, value: object) -> object:
    """A JSON mimetype's value stays an object (nbformat wants one); every other becomes text."""
    return value if mimetype.endswith("json") and isinstance(value, dict) else _text(value)


def _data(content: dict[str, Any]) -> dict[str, Any]:
    data = content.get("data")
    return data if isinstance(data, dict) else {}


@dataclass
class Collector:
    """Gathers the iopub messages of one execute request (`parent`) until the kernel says idle."""

    parent: str
    stdout: Bounded = field(default_factory=Bounded)
    stderr: Bounded = field(default_factory=Bounded)
    results: Bounded = field(default_factory=Bounded)
    error: str | None = None
    outputs: list[dict[str, Any]] = field(default_factory=list)
    rich_chars: int = 0
    rich_dropped: int = 0

    def add(self, msg: dict[str, Any]) -> bool:
        """Take one message; True once the kernel is idle after this request."""
        parent = msg.get("parent_header") or {}
        if not isinstance(parent, dict) or parent.get("msg_id") != self.parent:
            return False
        kind = (msg.get("header") or {}).get("msg_type") or msg.get("msg_type")
        content = msg.get("content") or {}
        if not isinstance(content, dict):
            return False
        if kind == "status":
            return content.get("execution_state") == "idle"
        handler = _HANDLERS.get(str(kind))
        if handler is not None:
            handler(self, content)
        return False

    def _stream(self, content: dict[str, Any]) -> None:
        name = "stderr" if content.get("name") == "stderr" else "stdout"
        text = _text(content.get("text", ""))
        (self.stderr if name == "stderr" else self.stdout).add(text)
        last = self.outputs[-1] if self.outputs else None
        if last and last["output_type"] == "stream" and last["name"] == name:
            last["pieces"].add(text)
        else:
            pieces = Bounded()
            pieces.add(text)
            self.outputs.append({"output_type": "stream", "name": name, "pieces": pieces})

    def _display(self, content: dict[str, Any], kind: str) -> None:
        data = {str(k): _value(str(k), v) for k, v in _data(content).items()}
        if isinstance(data.get("text/plain"), str):
            self.results.add(("\n" if self.results.total else "") + strip_ansi(data["text/plain"]))
        size = len(json.dumps(data))
        if self.rich_chars + size > MAX_RICH_CHARS:
            self.rich_dropped += 1
            data = {"text/plain": capped(_text(data.get("text/plain", "")))}
        else:
            self.rich_chars += size
        output: dict[str, Any] = {"output_type": kind, "data": data, "metadata": {}}
        if kind == "execute_result":
            output["execution_count"] = None
        self.outputs.append(output)

    def _error(self, content: dict[str, Any]) -> None:
        name, value = _text(content.get("ename", "")), _text(content.get("evalue", ""))
        trace = content.get("traceback")
        lines = [strip_ansi(_text(line)) for line in trace] if isinstance(trace, list) else []
        self.error = capped("\n".join([f"{name}: {value}", *lines]))
        self.outputs.append(
            {
                "output_type": "error",
                "ename": capped(name),
                "evalue": capped(value),
                "traceback": [capped("\n".join(lines))],
            }
        )

    def _clear(self, _content: dict[str, Any]) -> None:
        self.outputs.clear()

    def notebook_outputs(self) -> list[dict[str, Any]]:
        """The outputs as nbformat v4 outputs, the streams joined and bounded."""
        done = []
        for out in self.outputs:
            if out["output_type"] == "stream":
                out = {"output_type": "stream", "name": out["name"], "text": out["pieces"].text}
            done.append(out)
        if self.rich_dropped:
            note = (
                f"[{self.rich_dropped} rich outputs over {MAX_RICH_CHARS} characters were dropped]"
            )
            done.append({"output_type": "stream", "name": "stderr", "text": note + "\n"})
        return done


_HANDLERS = {
    "stream": Collector._stream,
    "execute_result": lambda c, content: c._display(content, "execute_result"),
    "display_data": lambda c, content: c._display(content, "display_data"),
    "error": Collector._error,
    "clear_output": Collector._clear,
}


def finished(
    collector: Collector,
    code: str,
    seconds: float,
    *,
    timed_out: bool = False,
    note: str | None = None,
    died: bool = False,
) -> CellResult:
    """The CellResult of a collected cell; `note` (added to its error) says what cbr did to it: the
    interrupt at its time limit, or why the kernel did not survive it (`died`)."""
    error = collector.error
    if note:
        error = f"{error}\n{note}" if error else note
    return CellResult(
        code=code,
        ok=error is None and not timed_out,
        stdout=collector.stdout.text,
        stderr=collector.stderr.text,
        result=collector.results.text,
        error=error,
        timed_out=timed_out,
        seconds=round(seconds, 3),
        outputs=collector.notebook_outputs(),
        kernel_died=died,
    )
