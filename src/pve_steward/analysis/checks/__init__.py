"""One module per area of checks; each check is declared with ``analysis.catalog.check``."""
