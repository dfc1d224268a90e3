"""Scale-out on scrapy-redis: the ``crawl_cluster`` fixture, its private Redis and its workers (pytest and crawl processes).

Owns the worker's Scrapy extension (``worker``: the request ledger in Redis), the private ``redis-server``
(``redisserver``), the coordinator loop (``run``), the fixture (``fixture``) and the cluster's report (``report``). The pure
records and checks of a cluster run live in ``core.cluster`` and ``core.ledger``.
May import: ``core``, ``probes``, ``measure``, ``reports`` and ``harness`` (the pytest side).
"""
