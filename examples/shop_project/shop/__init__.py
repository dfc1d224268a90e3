"""A realistic shop crawler, the example of replaying a recorded crawl under pytest-crawlmem."""
