# Scrapy settings for catalogbot project (the layout `scrapy startproject catalogbot` writes).
#
# The memory tests under tests/ crawl with exactly these settings, as `scrapy crawl catalog` does;
# a test's own `settings=` go on top, like `scrapy crawl -s NAME=VALUE`.

BOT_NAME = "catalogbot"

SPIDER_MODULES = ["catalogbot.spiders"]
NEWSPIDER_MODULE = "catalogbot.spiders"

ADDONS = {}

ROBOTSTXT_OBEY = True

CONCURRENT_REQUESTS = 16
CONCURRENT_REQUESTS_PER_DOMAIN = 16
DOWNLOAD_DELAY = 0

CATALOGBOT_CONTACT = "crawler@catalogbot.example"

DOWNLOADER_MIDDLEWARES = {
    "catalogbot.middlewares.ShopHeadersMiddleware": 543,
}

ITEM_PIPELINES = {
    "catalogbot.pipelines.PricePipeline": 300,
    "catalogbot.pipelines.DuplicatesPipeline": 400,
}

FEED_EXPORT_ENCODING = "utf-8"
