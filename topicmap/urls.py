"""Stable import path for :mod:`topicmap.web.urls` (URL judgements); new code imports that module."""

from topicmap.web.urls import *  # noqa: F403
