"""Static write-up pages (blog posts, GitHub READMEs, raw markdown or notebooks on the web).

    scrapy crawl pages -a urls=URL[,URL...] [-a kind=auto|writeup|notebook] [-a competition=SLUG] -O items.jsonl

Each page becomes a "doc" item with its body decoded strictly (declared charset, else UTF-8), or an
"error" item saying why it could not be used."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from cbr_crawlers.failures import describe
from dsagent_cbr.ingest.documents import RawDoc, SourceError
from dsagent_cbr.ingest.encoding import DecodeError, decode_body
from dsagent_cbr.ingest.sources import guess_format, html_title, kind_for


class PagesSpider(scrapy.Spider):
    name = "pages"

    def __init__(self, urls: str = "", kind: str = "auto", competition: str = "", **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.urls = [u.strip() for u in urls.split(",") if u.strip()]
        if not self.urls:
            raise ValueError("the pages spider needs -a urls=URL[,URL...]")
        self.kind = kind
        self.competition = competition

    async def start(self) -> AsyncIterator[Any]:
        for rank, url in enumerate(self.urls, 1):
            yield scrapy.Request(url, callback=self.parse, errback=self.on_error, cb_kwargs={"rank": rank},
                                 meta={"what": f"page {url}"})

    def on_error(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        reason, status = describe(failure, request.meta.get("what", request.url), self.settings)
        self.logger.warning("page: %s", reason)
        yield SourceError(url=request.url, reason=reason, stage="page", status=status).to_item()

    def parse(self, response: Response, rank: int) -> Iterator[dict[str, Any]]:
        content_type = response.headers.get("Content-Type", b"").decode("latin-1")
        try:
            text = decode_body(response.body, content_type)
        except DecodeError as exc:
            yield SourceError(url=response.url, reason=f"page {response.url}: {exc}", stage="page").to_item()
            return
        fmt = guess_format(response.url, content_type, text)
        title = html_title(text) if fmt == "html" else ""
        yield RawDoc(url=response.url, kind=kind_for(fmt, self.kind), content=text, format=fmt, title=title,
                     competition=self.competition, rank=rank,
                     extra={"content_type": content_type, "status": response.status}).to_item()
