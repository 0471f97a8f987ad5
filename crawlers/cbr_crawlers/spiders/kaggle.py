"""A competition's insights through Kaggle's API: the competition's metadata, its top-N public
notebooks by votes (listed, then each pulled), and its solution write-ups from the forums.

    scrapy crawl kaggle -a competition=SLUG [-a top=10] [-a notebooks=1] [-a writeups=1] -O items.jsonl

Items are dicts with "type": "competition" (metadata), "doc" (a RawDoc) or "error" (a SourceError).
Request shapes and response parsing live in dsagent_cbr.ingest.kaggle_api."""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from typing import Any

import scrapy
from scrapy.http import Response
from twisted.python.failure import Failure

from cbr_crawlers.failures import describe
from dsagent_cbr.errors import CbrError
from dsagent_cbr.ingest import kaggle_api as api
from dsagent_cbr.ingest.clean import looks_like_html
from dsagent_cbr.ingest.documents import RawDoc, SourceError

_TRUE = {"1", "true", "yes", "on"}


class KaggleSpider(scrapy.Spider):
    name = "kaggle"

    def __init__(self, competition: str = "", top: str | int = 10, notebooks: str = "1", writeups: str = "1",
                 api_url: str | None = None, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        if not competition:
            raise ValueError("the kaggle spider needs -a competition=SLUG")
        self.competition = competition
        self.top = max(1, int(top))
        self.want_notebooks = str(notebooks).lower() in _TRUE
        self.want_writeups = str(writeups).lower() in _TRUE
        self.api_url = api_url

    # ------------------------------------------------------------ plumbing

    @property
    def base(self) -> str:
        return api.api_base(override=self.api_url or self.settings.get("KAGGLE_API_URL"))

    def _auth(self) -> dict[str, str]:
        if not hasattr(self, "_headers"):
            try:
                user, key = api.load_credentials()
            except CbrError as exc:
                raise scrapy.exceptions.CloseSpider(str(exc)) from exc
            self._headers = {"Authorization": api.basic_auth(user, key), "Accept": "application/json"}
        return self._headers

    def _get(self, url: str, callback: Any, what: str, stage: str, fatal: bool = False,
             **cb_kwargs: Any) -> scrapy.Request:
        # credentials ride only on requests to the API itself, never to other hosts
        return scrapy.Request(url, callback=callback, errback=self.on_error, headers=self._auth(),
                              cb_kwargs=cb_kwargs, meta={"what": what, "stage": stage, "fatal": fatal})

    def _error(self, url: str, reason: str, stage: str, status: int | None = None,
               fatal: bool = False) -> dict[str, Any]:
        self.logger.warning("%s: %s", stage, reason)
        return SourceError(url=url, reason=reason, stage=stage, status=status, fatal=fatal).to_item()

    def on_error(self, failure: Failure) -> Iterator[dict[str, Any]]:
        request = failure.request  # type: ignore[attr-defined]
        reason, status = describe(failure, request.meta.get("what", request.url), self.settings, kaggle=True)
        yield self._error(request.url, reason, request.meta.get("stage", ""), status,
                          bool(request.meta.get("fatal")))

    def _json(self, response: Response, what: str) -> Any:
        return api.parse_json(response.text, what)

    # ------------------------------------------------------------ crawl

    async def start(self) -> AsyncIterator[Any]:
        yield self._get(api.competitions_list_url(self.base, self.competition), self.parse_competition,
                        f"competition {self.competition}", "competition", fatal=True)

    def parse_competition(self, response: Response) -> Iterator[Any]:
        try:
            comp = api.find_competition(self._json(response, "competitions/list"), self.competition)
        except api.ApiFormatError as exc:
            yield self._error(response.url, str(exc), "competition", fatal=True)
            return
        if comp is None:
            yield self._error(response.url, f"Kaggle has no competition named {self.competition!r}",
                              "competition", 404, fatal=True)
            return
        yield {"type": "competition", **api.competition_meta(comp, self.competition)}
        if self.want_notebooks:
            yield self._get(api.kernels_list_url(self.base, self.competition, self.top), self.parse_kernels,
                            f"the notebook list of {self.competition}", "notebook-list")
        if self.want_writeups:
            yield self._get(api.topics_list_url(self.base, self.competition, 100), self.parse_topics,
                            f"the discussion topics of {self.competition}", "writeup-list")

    def parse_kernels(self, response: Response) -> Iterator[Any]:
        try:
            kernels = api.top_kernels(self._json(response, "kernels/list"), self.top)
        except api.ApiFormatError as exc:
            yield self._error(response.url, str(exc), "notebook-list")
            return
        if not kernels:
            yield self._error(response.url, f"competition {self.competition} has no public notebooks",
                              "notebook-list")
        for rank, kernel in enumerate(kernels, 1):
            ref = str(kernel["ref"])
            yield self._get(api.kernel_pull_url(self.base, ref), self.parse_pull, f"notebook {ref}", "notebook",
                            kernel=kernel, rank=rank)

    def parse_pull(self, response: Response, kernel: dict[str, Any], rank: int) -> Iterator[Any]:
        ref = str(kernel["ref"])
        try:
            pulled = api.parse_pull(self._json(response, f"kernels/pull of {ref}"), ref)
        except api.ApiFormatError as exc:
            yield self._error(response.url, str(exc), "notebook")
            return
        is_script = pulled["kernel_type"].lower() == "script"
        yield RawDoc(
            url=api.kernel_web_url(ref), kind="notebook", content=pulled["source"],
            format="script" if is_script else "ipynb", title=str(kernel.get("title") or pulled["title"] or ref),
            competition=self.competition, rank=rank, votes=int(kernel.get("totalVotes") or 0),
            author=str(kernel.get("author") or ref.split("/")[0]), language=pulled["language"],
            extra={"ref": ref, "kernel_type": pulled["kernel_type"], "api_url": response.url},
        ).to_item()

    def parse_topics(self, response: Response) -> Iterator[Any]:
        try:
            topics = api.writeup_topics(self._json(response, "discussions/topics/list"), self.competition,
                                        self.top)
        except api.ApiFormatError as exc:
            yield self._error(response.url, str(exc), "writeup-list")
            return
        if not topics:
            yield self._error(response.url, f"competition {self.competition} has no solution write-ups in its "
                              "discussion forum", "writeup-list")
        for rank, topic in enumerate(topics, 1):
            if str(topic.get("content") or "").strip():
                yield self._writeup(topic, rank, response.url)
            else:
                yield self._get(api.topic_get_url(self.base, topic["id"]), self.parse_topic,
                                f"write-up {topic.get('title') or topic['id']}", "writeup", rank=rank)

    def parse_topic(self, response: Response, rank: int) -> Iterator[Any]:
        try:
            topic = api.parse_topic(self._json(response, "discussions/get"), response.url)
        except api.ApiFormatError as exc:
            yield self._error(response.url, str(exc), "writeup")
            return
        yield self._writeup(topic, rank, response.url)

    def _writeup(self, topic: dict[str, Any], rank: int, api_url: str) -> dict[str, Any]:
        content = str(topic["content"])
        url = str(topic.get("url") or "")
        if url.startswith("/"):
            url = api.WEB + url
        return RawDoc(
            url=url or api_url, kind="writeup", content=content,
            format="html" if looks_like_html(content) else "markdown", title=str(topic.get("title") or ""),
            competition=self.competition, rank=rank, votes=int(topic.get("votes") or 0),
            author=str(topic.get("authorName") or ""),
            extra={"topic_id": topic.get("id"), "place": api.place_of(str(topic.get("title") or "")),
                   "api_url": api_url},
        ).to_item()
