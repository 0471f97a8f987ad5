"""Scrapy spiders that feed dsagent-cbr's insight bank (see crawlers/scrapy.cfg)."""
