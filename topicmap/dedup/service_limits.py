"""The lookup service's default limits, in a module of their own so that the `topicmap` command can show them
without loading the service (Starlette, uvicorn, the fetcher and the extractors)."""

# URL lookups that fetch a page: the threads that run them (each waits on one site at a time, mostly for the
# network or a politeness slot, so a few serve many sites), and how many may be accepted at once, queued or
# running, before one more answers 503.
DEFAULT_URL_WORKERS = 8
DEFAULT_MAX_PENDING_URLS = 100
