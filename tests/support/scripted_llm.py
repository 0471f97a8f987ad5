"""A scripted OpenAI-compatible server on 127.0.0.1, for tests that need specific replies.

    with ScriptedLLM(["[2] > [1]", "Decision: ...", ...]) as server:
        settings = load_settings(model="scripted", base_url=server.url, api_key="test")

`delay` makes it a slow model that answers several requests at once, as vLLM and the hosted APIs do.
`replies` is a list consumed in order (each item a string, a (status, body) tuple for an HTTP
error, or DROP: the connection closed with no reply, as a server that dies does), or a callable `(messages: list[dict]) -> str | tuple[int, dict]`. Every request body is
kept in `server.requests`. It stands in for a model only; nothing measured through it is agent quality."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Callable
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

Reply = str | tuple[int, dict]
DROP = ("drop",)  # a reply: the connection is closed unanswered


class ScriptedLLM:
    def __init__(self, replies: list[Reply] | Callable[[list[dict]], Reply], delay: float = 0.0) -> None:
        self.replies = replies
        self.delay = delay  # seconds each request waits before its reply, requests waiting together
        self.requests: list[dict[str, Any]] = []
        self.arrived: list[float] = []  # each request's time.monotonic() on arrival
        self._lock = threading.Lock()
        self._server = ThreadingHTTPServer(("127.0.0.1", 0), self._handler())
        self.url = f"http://127.0.0.1:{self._server.server_address[1]}/v1"

    def _next(self, messages: list[dict]) -> Reply:
        with self._lock:
            if callable(self.replies):
                return self.replies(messages)
            if not self.replies:
                return (500, {"error": {"message": "script exhausted", "type": "server_error"}})
            return self.replies.pop(0)

    def _handler(self) -> type[BaseHTTPRequestHandler]:
        outer = self

        class Handler(BaseHTTPRequestHandler):
            def log_message(self, *args: Any) -> None:
                pass

            def _send(self, status: int, body: dict) -> None:
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                self.wfile.write(data)

            def do_GET(self) -> None:
                self._send(200, {"object": "list", "data": [{"id": "scripted", "object": "model"}]})

            def do_POST(self) -> None:
                body = json.loads(self.rfile.read(int(self.headers.get("Content-Length", 0))) or b"{}")
                outer.requests.append(body)
                outer.arrived.append(time.monotonic())
                time.sleep(outer.delay)  # a slow model, whose requests wait side by side
                reply = outer._next(body.get("messages", []))
                if reply is DROP:
                    self.close_connection = True
                    return
                if isinstance(reply, tuple):
                    self._send(*reply)
                    return
                words = sum(len(m.get("content", "").split()) for m in body.get("messages", []))
                self._send(200, {
                    "id": f"chatcmpl-{len(outer.requests)}", "object": "chat.completion", "created": 0,
                    "model": body.get("model", "scripted"),
                    "choices": [{"index": 0, "finish_reason": "stop",
                                 "message": {"role": "assistant", "content": reply}}],
                    "usage": {"prompt_tokens": words, "completion_tokens": len(reply.split()),
                              "total_tokens": words + len(reply.split())},
                })

        return Handler

    def __enter__(self) -> ScriptedLLM:
        threading.Thread(target=self._server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._server.shutdown()
        self._server.server_close()


class ByRole:
    """Replies by role, read from the prompt's opening words; each role's replies consumed in order.
    `roles` records the role of every request, in order."""

    OPENINGS = {"You are helping a data scientist choose": "rerank", "You are a data scientist planning": "plan",
                "Edit the script below": "program", "Write a new solution script": "program",
                "Your reply had no Python code": "program",
                "A script written for this task fails": "debug", "Summarise one experiment": "log",
                "Here are solved machine-learning tasks": "adapt"}

    def __init__(self, **replies: list[str]) -> None:
        self.replies, self.roles = replies, []

    def __call__(self, messages: list[dict]) -> str:
        text = messages[-1]["content"]
        role = next(r for opening, r in self.OPENINGS.items() if text.startswith(opening))
        self.roles.append(role)
        return self.replies[role].pop(0)
