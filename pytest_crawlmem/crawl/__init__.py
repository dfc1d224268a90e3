"""What runs in the crawl process (or a browser job's): the measuring extension, its probes and the runners."""
