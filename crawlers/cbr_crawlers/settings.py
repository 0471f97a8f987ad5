"""Crawl politely and reproducibly: obey robots.txt, throttle to the server's pace, retry transient
failures (429 and 5xx), cache responses under the cbr home, and refuse oversized pages."""

from __future__ import annotations

import os

from dsagent_cbr import __version__
from dsagent_cbr.config import load_settings


def _cache_dir() -> str:
    return str(load_settings().cache_path / "scrapy-http")


BOT_NAME = "dsagent-cbr"
SPIDER_MODULES = ["cbr_crawlers.spiders"]
NEWSPIDER_MODULE = "cbr_crawlers.spiders"

USER_AGENT = (f"dsagent-cbr/{__version__} (+https://github.com/dsagent-cbr/dsagent-cbr; research crawler "
              "that collects data-science solution write-ups for a case-based-reasoning agent)")

ROBOTSTXT_OBEY = True
DOWNLOADER_MIDDLEWARES = {
    "scrapy.downloadermiddlewares.robotstxt.RobotsTxtMiddleware": None,
    "cbr_crawlers.middlewares.SharedRobotsTxtMiddleware": 100,  # the stock one lets concurrent requests by
}

CONCURRENT_REQUESTS = 8
CONCURRENT_REQUESTS_PER_DOMAIN = 2
# seconds between requests to one site; CBR_CRAWL_DELAY changes it (0 for a loopback test server)
DOWNLOAD_DELAY = float(os.environ.get("CBR_CRAWL_DELAY", "0.5"))
DOWNLOAD_TIMEOUT = 60

AUTOTHROTTLE_ENABLED = True
AUTOTHROTTLE_START_DELAY = max(DOWNLOAD_DELAY, 1.0) if DOWNLOAD_DELAY else 0.0
AUTOTHROTTLE_MAX_DELAY = 30.0
AUTOTHROTTLE_TARGET_CONCURRENCY = 1.0

RETRY_ENABLED = True
RETRY_TIMES = 3
RETRY_HTTP_CODES = [429, 500, 502, 503, 504, 522, 524, 408]

# A write-up or notebook is rarely over a megabyte; anything past 10 MiB is not one.
DOWNLOAD_MAXSIZE = 10 * 1024 * 1024
DOWNLOAD_WARNSIZE = 4 * 1024 * 1024

HTTPCACHE_ENABLED = True
HTTPCACHE_DIR = _cache_dir()
HTTPCACHE_EXPIRATION_SECS = 24 * 3600
HTTPCACHE_STORAGE = "cbr_crawlers.httpcache.CredentialFreeCacheStorage"  # never writes the API key to disk
# failures are never cached: the next run must ask again
HTTPCACHE_IGNORE_HTTP_CODES = [401, 403, 404, 408, 429, 500, 502, 503, 504, 522, 524]

COOKIES_ENABLED = False
TELNETCONSOLE_ENABLED = False
FEED_EXPORT_ENCODING = "utf-8"
LOG_LEVEL = "INFO"

# Kaggle API base; the spider also reads CBR_KAGGLE_API, so tests can point it at a loopback server.
KAGGLE_API_URL = os.environ.get("CBR_KAGGLE_API", "https://www.kaggle.com/api/v1")
