"""Kaggle's public REST API (v1), as the official `kaggle` client and `kagglesdk` call it: credentials,
request URLs and response parsing. Pure functions; the Scrapy spider does the fetching.

Endpoints (base https://www.kaggle.com/api/v1, HTTP basic auth with username and API key):
- GET competitions/list?search=SLUG&page=1            -> [ApiCompetition] or {"competitions": [...]}
- GET kernels/list?competition=SLUG&sortBy=voteCount&pageSize=N&page=1
                                                      -> [ApiKernelMetadata] or {"kernels": [...]}
- GET kernels/pull?userName=OWNER&kernelSlug=SLUG      -> {"metadata": {...}, "blob": {"source", "language",
                                                          "kernelType"}}
- GET discussions/topics/list?searchQuery=Q&pageSize=N -> {"topics": [ApiDiscussionTopic], "totalCount",
                                                          "nextPageToken"}
- GET competitions/data/download-all/SLUG            -> a zip of the competition's data files (or a
                                                          redirect to it)
- GET discussions/{id}/get                            -> {"topic": ApiDiscussionTopic} (its "content" is
                                                          the first post, the write-up itself)
The discussion API has no per-competition listing, so write-ups are found by searching the forums
for the competition and keeping topics whose URL lies under /competitions/SLUG/ and whose title reads
like a solution write-up ("1st place solution", "our approach", ...)."""

from __future__ import annotations

import base64
import json
import os
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any
from urllib.parse import urlencode

from dsagent_cbr.errors import CbrError

DEFAULT_API = "https://www.kaggle.com/api/v1"
WEB = "https://www.kaggle.com"


class ApiFormatError(ValueError):
    """A response that is not the JSON shape the endpoint documents."""


# ---------------------------------------------------------------- configuration


def api_base(environ: Mapping[str, str] | None = None, override: str | None = None) -> str:
    env = os.environ if environ is None else environ
    base = override or env.get("CBR_KAGGLE_API") or DEFAULT_API
    if not re.match(r"^https?://", base):
        raise CbrError(f"The Kaggle API URL {base!r} must start with http:// or https://.")
    return base.rstrip("/")


def load_credentials(
    environ: Mapping[str, str] | None = None, home: Path | None = None
) -> tuple[str, str]:
    """(username, key) from KAGGLE_USERNAME/KAGGLE_KEY, else from kaggle.json (KAGGLE_CONFIG_DIR or ~/.kaggle),
    the same places the official client looks."""
    env = os.environ if environ is None else environ
    if env.get("KAGGLE_USERNAME") and env.get("KAGGLE_KEY"):
        return env["KAGGLE_USERNAME"], env["KAGGLE_KEY"]
    folder = (
        Path(env["KAGGLE_CONFIG_DIR"])
        if env.get("KAGGLE_CONFIG_DIR")
        else (home or Path.home()) / ".kaggle"
    )
    path = folder / "kaggle.json"
    if not path.is_file():
        raise CbrError(
            "No Kaggle credentials: set KAGGLE_USERNAME and KAGGLE_KEY, or put kaggle.json "
            f"(from kaggle.com > Settings > Create New Token) at {path}."
        )
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
        return str(data["username"]), str(data["key"])
    except (json.JSONDecodeError, KeyError, TypeError, UnicodeDecodeError) as exc:
        raise CbrError(f"{path} is not a kaggle.json with 'username' and 'key'.") from exc


def basic_auth(username: str, key: str) -> str:
    return "Basic " + base64.b64encode(f"{username}:{key}".encode()).decode("ascii")


# ---------------------------------------------------------------- URLs


def _url(base: str, path: str, params: Mapping[str, Any]) -> str:
    query = urlencode({k: v for k, v in params.items() if v is not None})
    return f"{base}/{path}" + (f"?{query}" if query else "")


def competitions_list_url(base: str, slug: str) -> str:
    return _url(base, "competitions/list", {"search": slug, "page": 1})


def kernels_list_url(base: str, slug: str, page_size: int, page: int = 1) -> str:
    return _url(
        base,
        "kernels/list",
        {"competition": slug, "sortBy": "voteCount", "pageSize": page_size, "page": page},
    )


def kernel_pull_url(base: str, ref: str) -> str:
    owner, _, kernel = ref.partition("/")
    return _url(base, "kernels/pull", {"userName": owner, "kernelSlug": kernel})


def topics_list_url(base: str, slug: str, page_size: int) -> str:
    return _url(
        base, "discussions/topics/list", {"searchQuery": f"{slug} solution", "pageSize": page_size}
    )


def topic_get_url(base: str, topic_id: int | str) -> str:
    return _url(base, f"discussions/{topic_id}/get", {})


def competition_files_url(base: str, slug: str) -> str:
    """All of a competition's data files in one zip (the official client's competitions download)."""
    return _url(base, f"competitions/data/download-all/{slug}", {})


def kernel_web_url(ref: str) -> str:
    return f"{WEB}/code/{ref}"


# ---------------------------------------------------------------- responses


def parse_json(body: str, what: str) -> Any:
    try:
        return json.loads(body)
    except json.JSONDecodeError as exc:
        raise ApiFormatError(
            f"Kaggle returned malformed JSON for {what} ({exc.msg} at line {exc.lineno}, "
            f"column {exc.colno})"
        ) from exc


def _listing(data: Any, key: str, what: str) -> list[dict[str, Any]]:
    """The v1 API answers with a bare list; kagglesdk's newer responses wrap it in {key: [...]}."""
    if isinstance(data, dict) and key in data:
        data = data[key]
    if not isinstance(data, list) or not all(isinstance(x, dict) for x in data):
        raise ApiFormatError(f"Kaggle's answer to {what} is not a list of {key}")
    return data


def _slug_of(ref: str) -> str:
    return ref.rstrip("/").rsplit("/", 1)[-1]


def find_competition(data: Any, slug: str) -> dict[str, Any] | None:
    for comp in _listing(data, "competitions", "competitions/list"):
        ref = str(comp.get("ref") or comp.get("url") or "")
        if _slug_of(ref) == slug:
            return comp
    return None


def competition_meta(comp: Mapping[str, Any], slug: str) -> dict[str, Any]:
    tags = comp.get("tags") or []
    names = [
        str(t.get("name") or t.get("ref") or "") if isinstance(t, dict) else str(t) for t in tags
    ]
    return {
        "slug": slug,
        "title": str(comp.get("title") or slug),
        "description": str(comp.get("description") or ""),
        "url": str(comp.get("url") or f"{WEB}/competitions/{slug}"),
        "category": str(comp.get("category") or ""),
        "metric": str(comp.get("evaluationMetric") or ""),
        "deadline": str(comp.get("deadline") or ""),
        "tags": [n for n in names if n],
    }


def top_kernels(data: Any, top: int) -> list[dict[str, Any]]:
    """The N most voted kernels with a usable ref; ties keep the API's order."""
    kernels = [
        k for k in _listing(data, "kernels", "kernels/list") if "/" in str(k.get("ref") or "")
    ]
    ranked = sorted(enumerate(kernels), key=lambda p: (-int(p[1].get("totalVotes") or 0), p[0]))
    return [k for _, k in ranked[:top]]


def parse_pull(data: Any, ref: str) -> dict[str, Any]:
    if not isinstance(data, dict) or not isinstance(data.get("blob"), dict):
        raise ApiFormatError(f"Kaggle's answer to kernels/pull for {ref} has no 'blob'")
    blob = data["blob"]
    source = blob.get("source")
    if not isinstance(source, str) or not source.strip():
        raise ApiFormatError(f"notebook {ref} came back with an empty source")
    meta = data.get("metadata") if isinstance(data.get("metadata"), dict) else {}
    return {
        "source": source,
        "language": str(blob.get("language") or meta.get("language") or "python"),
        "kernel_type": str(blob.get("kernelType") or meta.get("kernelType") or "notebook"),
        "title": str(meta.get("title") or ""),
    }


_WRITEUP_TITLE = re.compile(
    r"\b(\d+(st|nd|rd|th)|first|second|third|top[- ]?\d+%?|gold|silver|bronze)\b.*\b(place|solution|medal)\b"
    r"|\bsolution\b|\bwrite[- ]?up\b|\bour approach\b|\bapproach\b.*\bLB\b",
    re.I,
)


def is_writeup_title(title: str) -> bool:
    return bool(_WRITEUP_TITLE.search(title))


def place_of(title: str) -> int | None:
    match = re.search(r"\b(\d+)(st|nd|rd|th)\b", title, re.I)
    if match:
        return int(match.group(1))
    words = {"first": 1, "second": 2, "third": 3}
    match = re.search(r"\b(first|second|third)\s+place\b", title, re.I)
    return words[match.group(1).lower()] if match else None


def writeup_topics(data: Any, slug: str, top: int) -> list[dict[str, Any]]:
    """Topics of this competition's forum that read like solution write-ups, best placed first, then by
    votes."""
    if isinstance(data, dict) and "topics" not in data and data.get("totalCount", None) == 0:
        return []
    topics = _listing(data, "topics", "discussions/topics/list")
    marker = f"/competitions/{slug}/"
    mine = [
        t
        for t in topics
        if marker in str(t.get("url") or "") and is_writeup_title(str(t.get("title") or ""))
    ]
    mine.sort(key=lambda t: (place_of(str(t.get("title"))) or 10**6, -int(t.get("votes") or 0)))
    return mine[:top]


def parse_topic(data: Any, topic_id: Any) -> dict[str, Any]:
    topic = data.get("topic") if isinstance(data, dict) else None
    if not isinstance(topic, dict):
        raise ApiFormatError(f"Kaggle's answer to discussions/{topic_id}/get has no 'topic'")
    if not str(topic.get("content") or "").strip():
        raise ApiFormatError(f"write-up topic {topic_id} has no content")
    return topic


# ---------------------------------------------------------------- errors


def status_reason(status: int, what: str, retries: int | None = None) -> str:
    """One sentence a user can act on, for an HTTP error from Kaggle."""
    again = f" after {retries} retries" if retries else ""
    if status == 401:
        return (
            f"Kaggle rejected the credentials (HTTP 401) for {what}: check KAGGLE_USERNAME/KAGGLE_KEY "
            "or ~/.kaggle/kaggle.json"
        )
    if status == 403:
        return (
            f"Kaggle refused access (HTTP 403) to {what}: accept the competition's rules on kaggle.com "
            "or use a key with access"
        )
    if status == 404:
        return f"Kaggle has no {what} (HTTP 404)"
    if status == 429:
        return f"Kaggle is rate-limiting us (HTTP 429) on {what}{again}: wait a while and run again"
    if status >= 500:
        return f"Kaggle's server failed (HTTP {status}) on {what}{again}: try again later"
    return f"Kaggle answered HTTP {status} for {what}"
