"""The fetcher's default limits, in a module of their own so settings can name them without loading the fetcher
(requests, the HTML extractors) — the Dagster resource that exposes them is read when the code location loads."""

MiB = 1024 * 1024
# Defaults a polite crawler picks (Scrapy retries twice; 30 s is what a person waits for a page at most).
DEFAULT_TOTAL_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_BODY_BYTES = 10 * MiB
DEFAULT_MAX_REDIRECTS = 7
