"""A real HTTP server on 127.0.0.1 that answers like Kaggle's v1 API (and serves plain pages and a
robots.txt), filled with real write-up and notebook text from ../shared/reference at test time.

The JSON envelopes are written here after the shapes the official client reads (see
dsagent_cbr.ingest.kaggle_api); the texts inside them are the DS-Agent human-insight cases."""

from __future__ import annotations

import base64
import contextlib
import json
import re
import threading
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass, field
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

REFERENCE = Path(__file__).resolve().parents[2].parent / "shared" / "reference" / "dsagent-human-insights"

Reply = tuple[int, dict[str, str], bytes]
Handler = Callable[[re.Match[str], dict[str, str]], Reply]


def json_reply(data: Any, status: int = 200) -> Reply:
    return status, {"Content-Type": "application/json; charset=utf-8"}, json.dumps(data).encode("utf-8")


def raw_reply(body: bytes, content_type: str, status: int = 200) -> Reply:
    return status, {"Content-Type": content_type}, body


@dataclass
class Loopback:
    """Routes are (regex on the path, handler); requests under /api/ must carry the expected basic auth."""

    username: str = "cbr-test"
    key: str = "0123456789abcdef"
    robots: str = "User-agent: *\nDisallow: /private/\n"
    routes: list[tuple[re.Pattern[str], Handler]] = field(default_factory=list)
    hits: Counter[str] = field(default_factory=Counter)
    posts: list[tuple[str, bytes]] = field(default_factory=list)
    server: ThreadingHTTPServer | None = None

    @property
    def url(self) -> str:
        assert self.server is not None
        host, port = self.server.server_address[:2]
        return f"http://{host}:{port}"

    @property
    def api(self) -> str:
        return self.url + "/api/v1"

    def route(self, pattern: str, handler: Handler) -> None:
        self.routes.insert(0, (re.compile(pattern + r"$"), handler))  # later routes win

    def reply(self, path: str, reply: Reply) -> None:
        self.route(re.escape(path), lambda m, q: reply)

    def _answer(self, path: str, query: dict[str, str], auth: str | None) -> Reply:
        self.hits[path] += 1
        if path == "/robots.txt":
            return raw_reply(self.robots.encode(), "text/plain")
        if path.startswith("/api/"):
            expected = "Basic " + base64.b64encode(f"{self.username}:{self.key}".encode()).decode()
            if auth != expected:
                return json_reply({"code": 401, "message": "Unauthenticated"}, 401)
        for pattern, handler in self.routes:
            match = pattern.match(path)
            if match:
                return handler(match, query)
        return json_reply({"code": 404, "message": "Not found"}, 404)

    def __enter__(self) -> Loopback:
        owner = self

        class _Handler(BaseHTTPRequestHandler):
            def do_GET(self) -> None:  # noqa: N802 (http.server's name)
                parts = urlsplit(self.path)
                query = {k: v[0] for k, v in parse_qs(parts.query).items()}
                status, headers, body = owner._answer(parts.path, query, self.headers.get("Authorization"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                # the crawler may hang up on an oversized page
                with contextlib.suppress(BrokenPipeError, ConnectionResetError):
                    self.wfile.write(body)

            def do_POST(self) -> None:  # noqa: N802
                parts = urlsplit(self.path)
                body = self.rfile.read(int(self.headers.get("Content-Length") or 0))
                owner.posts.append((parts.path, body))
                status, headers, payload = owner._answer(parts.path, {"_body": body.decode("utf-8", "replace")},
                                                         self.headers.get("Authorization"))
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            def log_message(self, format: str, *args: Any) -> None:  # noqa: A002
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        self.server.daemon_threads = True
        threading.Thread(target=self.server.serve_forever, daemon=True).start()
        return self

    def __exit__(self, *exc: object) -> None:
        if self.server is not None:
            self.server.shutdown()
            self.server.server_close()


# ------------------------------------------------------------------ real texts, Kaggle envelopes


def reference_cases(competition: str) -> tuple[dict[str, str], dict[str, str]]:
    """(writeups, notebooks) of a competition in the reference corpus, name -> text. Numbered cases
    (<slug>-1.case) are the write-ups; the named ones were distilled from notebooks."""
    writeups, notebooks = {}, {}
    for path in sorted(REFERENCE.glob(f"*/{competition}-*.case")):
        name = path.stem[len(competition) + 1:]
        text = path.read_text(encoding="utf-8")
        (writeups if name.isdigit() else notebooks)[name] = text
    return writeups, notebooks


def notebook_json(text: str, title: str) -> str:
    """An nbformat-4 notebook around real text: fenced code becomes code cells, the prose markdown
    cells, and each code cell gets an output that cleaning must drop."""
    cells: list[dict[str, Any]] = [{"cell_type": "markdown", "metadata": {}, "source": [f"# {title}\n"]}]
    for n, chunk in enumerate(re.split(r"```(?:python)?\n(.*?)```", text, flags=re.S)):
        if not chunk.strip():
            continue
        if n % 2:
            cells.append({"cell_type": "code", "metadata": {}, "execution_count": n, "source": chunk,
                          "outputs": [{"output_type": "stream", "name": "stdout", "text": ["OUTPUT-NOISE\n"]}]})
        else:
            for para in re.split(r"\n\s*\n", chunk):
                if para.strip():
                    cells.append({"cell_type": "markdown", "metadata": {}, "source": para.strip().splitlines(True)})
    cells.append({"cell_type": "code", "metadata": {}, "execution_count": 99, "outputs": [],
                  "source": ["import pandas as pd\n", "train = pd.read_csv('train.csv')\n"]})
    nb = {"cells": cells, "nbformat": 4, "nbformat_minor": 5,
          "metadata": {"kernelspec": {"name": "python3", "language": "python", "display_name": "Python 3"}}}
    return json.dumps(nb)


def markdown_to_html(text: str, title: str) -> str:
    """A forum post as Kaggle renders it, with page furniture the cleaner must drop."""
    body = []
    for para in re.split(r"\n\s*\n", text.strip()):
        head = re.match(r"^(#{1,6})\s+(.*)(?:\n|$)", para)
        if head:
            n = len(head.group(1))
            body.append(f"<h{n}>{head.group(2)}</h{n}>")
            para = para[head.end():]
        if para.strip():
            body.append("<p>" + para.replace("&", "&amp;").replace("<", "&lt;") + "</p>")
    return ("<html><head><title>" + title + "</title><style>.x{color:red}</style>"
            "<script>var tracker = 'SCRIPT-NOISE';</script></head><body>"
            "<nav><a href='/'>NAV-NOISE Home</a></nav><article>" + "\n".join(body) + "</article>"
            "<footer>FOOTER-NOISE</footer></body></html>")


@dataclass
class KaggleFixture:
    slug: str
    writeups: dict[str, str]
    notebooks: dict[str, str]
    refs: list[str] = field(default_factory=list)  # notebook refs, most voted first
    topic_ids: list[int] = field(default_factory=list)


def install_competition(server: Loopback, slug: str, *, writeups: bool = True, notebooks: bool = True,
                        bad_notebook: str | None = None) -> KaggleFixture:
    """Serve competitions/list, kernels/list, kernels/pull, discussions/topics/list and discussions/ID/get
    for a competition of the reference corpus."""
    texts_w, texts_n = reference_cases(slug)
    assert texts_w or texts_n, f"no reference cases for {slug}"
    fixture = KaggleFixture(slug, texts_w if writeups else {}, texts_n if notebooks else {})
    comp = {"id": 1, "ref": f"https://www.kaggle.com/competitions/{slug}", "title": slug.replace("-", " ").title(),
            "url": f"https://www.kaggle.com/competitions/{slug}", "description": "Playground tabular regression",
            "category": "Playground", "evaluationMetric": "RMSE", "deadline": "2023-01-09T23:59:00Z",
            "tags": [{"ref": "tabular", "name": "tabular"}, {"ref": "regression", "name": "regression"}]}
    decoy = {**comp, "id": 2, "ref": f"https://www.kaggle.com/competitions/{slug}-other", "title": "Other"}
    server.route(r"/api/v1/competitions/list", lambda m, q: json_reply([decoy, comp]))

    kernels = []
    pulls: dict[str, str] = {}
    for i, (name, text) in enumerate(sorted(fixture.notebooks.items())):
        ref = f"kaggler{i}/{name}"
        votes = 500 - 37 * i
        kernels.append({"ref": ref, "title": name.replace("-", " ").title(), "author": f"Kaggler {i}",
                        "totalVotes": votes, "language": "python", "kernelType": "notebook"})
        pulls[ref] = bad_notebook if bad_notebook is not None and i == 0 else notebook_json(text, name)
    fixture.refs = [k["ref"] for k in sorted(kernels, key=lambda k: -k["totalVotes"])]

    def kernels_list(m: re.Match[str], q: dict[str, str]) -> Reply:
        assert q.get("competition") == slug and q.get("sortBy") == "voteCount", q
        page = sorted(kernels, key=lambda k: -k["totalVotes"])[: int(q.get("pageSize", 20))]
        return json_reply(page[::-1])  # least voted first: the spider must rank by votes itself

    def kernel_pull(m: re.Match[str], q: dict[str, str]) -> Reply:
        ref = f"{q.get('userName')}/{q.get('kernelSlug')}"
        if ref not in pulls:
            return json_reply({"code": 404, "message": "Notebook not found"}, 404)
        meta = next(k for k in kernels if k["ref"] == ref)
        return json_reply({"metadata": {**meta, "id": 7}, "blob": {"source": pulls[ref], "language": "python",
                                                                    "kernelType": "notebook"}})

    server.route(r"/api/v1/kernels/list", kernels_list)
    server.route(r"/api/v1/kernels/pull", kernel_pull)

    topics, bodies = [], {}
    for i, (_name, text) in enumerate(sorted(fixture.writeups.items(), key=lambda p: int(p[0]))):
        tid = 4000 + i
        place = ["1st", "2nd", "3rd"][i] if i < 3 else f"{i + 1}th"
        title = f"{place} place solution"
        topic = {"id": tid, "title": title, "url": f"/competitions/{slug}/discussion/{tid}", "votes": 90 - i,
                 "authorName": f"Winner {i}", "forumName": comp["title"], "commentCount": 3}
        topics.append(topic)
        bodies[tid] = {**topic, "content": markdown_to_html(text, title) if i % 2 == 0 else text}
        fixture.topic_ids.append(tid)
    topics += [
        {"id": 9001, "title": "Question about the data", "url": f"/competitions/{slug}/discussion/9001", "votes": 99},
        {"id": 9002, "title": "1st place solution", "url": f"/competitions/{slug}-other/discussion/9002", "votes": 5},
    ]
    server.route(r"/api/v1/discussions/topics/list",
                 lambda m, q: json_reply({"topics": topics, "totalCount": len(topics), "nextPageToken": ""}))

    def topic_get(m: re.Match[str], q: dict[str, str]) -> Reply:
        tid = int(m.group(1))
        return json_reply({"topic": bodies[tid]}) if tid in bodies else json_reply({"code": 404}, 404)

    server.route(r"/api/v1/discussions/(\d+)/get", topic_get)
    return fixture
