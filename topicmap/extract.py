"""Stable import path for :mod:`topicmap.web.extract` (story extraction); new code imports that module."""

from topicmap.web.extract import *  # noqa: F403
