"""Attribution: who keeps a leak and which line stores into it (crawl process).

Owns the attribution window (``window``: a short traced stretch of a leaky crawl), the holder search (``holders``: containers
that grew, at any depth below a root, and ``scope``: which of the user's modules it walks), the keeping line
(``keeping``: the code that stores into a holder), referrer paths (``retention``), declared holders measured at each
checkpoint (``declared``) and the keeping code read from source (``sourcecode``).
May import: ``core`` and ``probes``.
"""
