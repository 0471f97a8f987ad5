"""Say in one sentence why a request failed, from the Twisted failure Scrapy hands to an errback."""

from __future__ import annotations

from typing import Any

from scrapy.exceptions import DownloadCancelledError, IgnoreRequest
from scrapy.spidermiddlewares.httperror import HttpError
from twisted.internet.defer import CancelledError
from twisted.internet.error import ConnectionRefusedError, DNSLookupError, TimeoutError
from twisted.python.failure import Failure


def describe(failure: Failure, what: str, settings: Any, *, kaggle: bool = False) -> tuple[str, int | None]:
    """(reason, HTTP status or None)."""
    from dsagent_cbr.ingest.kaggle_api import status_reason

    if failure.check(HttpError):
        status = failure.value.response.status
        retried = settings.getint("RETRY_TIMES") if status in settings.getlist("RETRY_HTTP_CODES") else None
        if kaggle:
            return status_reason(status, what, retried), status
        again = f" after {retried} retries" if retried else ""
        return f"the server answered HTTP {status} for {what}{again}", status
    text = str(failure.value)
    if failure.check(DownloadCancelledError, CancelledError) or "max size" in text:
        limit = settings.getint("DOWNLOAD_MAXSIZE")
        return f"{what} is larger than the download size limit ({limit / 2**20:.0f} MiB)", None
    if failure.check(IgnoreRequest) and "robots.txt" in text.lower():
        return f"robots.txt of the site forbids fetching {what}", None
    if failure.check(IgnoreRequest):
        return f"{what} was not fetched: {text or 'request ignored'}", None
    if failure.check(ConnectionRefusedError):
        return f"could not connect to fetch {what} (connection refused)", None
    if failure.check(DNSLookupError):
        return f"could not resolve the host of {what}", None
    if failure.check(TimeoutError):
        return f"timed out fetching {what}", None
    return f"could not fetch {what}: {failure.type.__name__}: {text}", None
