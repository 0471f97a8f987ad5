"""A fix for Scrapy's robots.txt middleware, used in its place (see settings.DOWNLOADER_MIDDLEWARES).

Since scrapy/scrapy#6802 every request that arrives while a site's robots.txt is still downloading
awaits the same Deferred through asFuture(), whose callback returns None: the first waiter gets the
parser, every later one gets None and is let through as if the site had no robots.txt. Here each
waiter gets its own Deferred, fed by a callback that passes the parser along the chain."""

from __future__ import annotations

from scrapy.downloadermiddlewares.robotstxt import RobotsTxtMiddleware
from scrapy.http import Request
from scrapy.robotstxt import RobotParser
from scrapy.utils.defer import maybe_deferred_to_future
from scrapy.utils.httpobj import urlparse_cached
from twisted.internet.defer import Deferred


class SharedRobotsTxtMiddleware(RobotsTxtMiddleware):
    async def robot_parser(self, request: Request) -> RobotParser | None:
        pending = self._parsers.get(urlparse_cached(request).netloc)
        if not isinstance(pending, Deferred):
            return await super().robot_parser(request)
        mine: Deferred[RobotParser | None] = Deferred()

        def relay(parser: RobotParser | None) -> RobotParser | None:
            mine.callback(parser)
            return parser  # keep it on the chain for the next waiter

        pending.addCallback(relay)
        return await maybe_deferred_to_future(mine)
