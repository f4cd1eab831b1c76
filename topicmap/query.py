"""Stable import path for :mod:`topicmap.topics.query` (the boolean topic query language); new code imports that module."""

from topicmap.topics.query import *  # noqa: F403
