"""``python -m ops e2e``: one stack deployed to Azure, measured, probed, drilled, destroyed and checked for leftovers
(docs/e2e.md). What it writes is ``offline.runs.Run``."""
