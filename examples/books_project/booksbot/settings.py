"""Settings of the booksbot project, as `scrapy startproject booksbot` writes them (crawl process)."""

BOT_NAME = "booksbot"

SPIDER_MODULES = ["booksbot.spiders"]
NEWSPIDER_MODULE = "booksbot.spiders"

# Obey robots.txt rules
ROBOTSTXT_OBEY = True

CONCURRENT_REQUESTS_PER_DOMAIN = 8
DOWNLOAD_DELAY = 0

ITEM_PIPELINES = {
    "booksbot.pipelines.PricePipeline": 300,
}

FEED_EXPORT_ENCODING = "utf-8"
