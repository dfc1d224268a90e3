"""The pytest side: options, budgets at collection, fixtures, child processes, the summary (pytest process)."""
