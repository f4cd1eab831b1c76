"""Stable import path for :mod:`topicmap.web.fetch` (the web fetcher); new code imports that module."""

from topicmap.web.fetch import *  # noqa: F403
