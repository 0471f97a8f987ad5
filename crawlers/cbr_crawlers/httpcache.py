"""Scrapy's filesystem HTTP cache, minus the credentials.

The stock storage writes each request's headers next to the cached response, which would leave the
Kaggle API key (basic auth) in plain text under the cache folder. The cache key does not depend on
headers, so dropping Authorization changes nothing else."""

from __future__ import annotations

from scrapy import Spider
from scrapy.extensions.httpcache import FilesystemCacheStorage
from scrapy.http import Request, Response

_SECRET_HEADERS = {b"authorization", b"proxy-authorization", b"cookie"}


class CredentialFreeCacheStorage(FilesystemCacheStorage):
    def store_response(self, spider: Spider, request: Request, response: Response) -> None:
        headers = {k: v for k, v in request.headers.items() if k.lower() not in _SECRET_HEADERS}
        super().store_response(spider, request.replace(headers=headers), response)
