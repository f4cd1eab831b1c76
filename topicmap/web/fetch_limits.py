"""The fetcher's default limits, in a module of their own so settings can name them without loading the fetcher
(requests, the HTML extractors) — the Dagster resource that exposes them is read when the code location loads."""

MiB = 1024 * 1024
# Defaults a polite crawler picks (Scrapy retries twice; 30 s is what a person waits for a page at most).
DEFAULT_TOTAL_TIMEOUT = 30.0
DEFAULT_MAX_RETRIES = 2
DEFAULT_MAX_BODY_BYTES = 10 * MiB
DEFAULT_MAX_REDIRECTS = 7


def check_retry_budget(max_retries: int, backoff_base: float, total_timeout: float) -> None:
    """Retries are bounded by the total timeout: their back-off waits alone must leave time for requests.

    Raises ValueError naming the settings when ``max_retries`` back-offs (``backoff_base`` * 1, 2, 4, ...
    seconds) would use up ``total_timeout`` before the last retry could be sent."""
    backoff = backoff_base * (2**max_retries - 1)
    if max_retries and backoff >= total_timeout:
        raise ValueError(
            f"max_retries={max_retries} waits {backoff:g} s in back-off (backoff_base={backoff_base:g} s, "
            f"doubling), which does not fit in total_timeout={total_timeout:g} s: lower max_retries or "
            "raise total_timeout"
        )
