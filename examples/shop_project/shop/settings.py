"""Settings of the shop project, as ``scrapy startproject`` lays them out (crawl process)."""

BOT_NAME = "shop"
SPIDER_MODULES = ["shop.spiders"]
NEWSPIDER_MODULE = "shop.spiders"

USER_AGENT = "acme-shop-monitor (+https://www.acme-shop.example/bots)"
ROBOTSTXT_OBEY = True
COOKIES_ENABLED = True
CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0

ITEM_PIPELINES = {
    "shop.pipelines.PricePipeline": 300,
    "shop.pipelines.RequiredFieldsPipeline": 400,
    "shop.pipelines.DuplicatesPipeline": 500,
}

FEED_EXPORT_ENCODING = "utf-8"
