"""Stable import path for :mod:`topicmap.web.links` (the links a story makes); new code imports that module."""

from topicmap.web.links import *  # noqa: F403
