"""The shop's sitemap spider: every product the sitemap lists, by a rule that names the shop's host (crawl process)."""

from __future__ import annotations

from scrapy.spiders import SitemapSpider

from shop.spiders.catalog import ShopSpider


class ShopSitemapSpider(SitemapSpider):
    """Reads https://www.acme-shop.example/sitemap.xml and parses the product pages it lists (the home page and the
    categories it also lists match no rule and are not crawled)."""

    name = "shop_sitemap"
    allowed_domains = ["acme-shop.example"]  # noqa: RUF012 - Scrapy's spider attributes are plain lists
    sitemap_urls = ["https://www.acme-shop.example/sitemap.xml"]  # noqa: RUF012
    # the rule names the host, as many real projects' rules do: the replay copies still match it (docs/replay.md)
    sitemap_rules = [(r"^https://www\.acme-shop\.example/p/\d+-", "parse_product")]  # noqa: RUF012

    parse_product = ShopSpider.parse_product
