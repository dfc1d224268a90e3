"""The pytest side: options, budgets at collection, fixtures, child processes, the summary (pytest process).

May import every room; only this room (and ``cluster``'s fixture) imports pytest.
"""
