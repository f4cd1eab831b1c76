"""Stable import path for :mod:`topicmap.web.dates` (publication dates); new code imports that module."""

from topicmap.web.dates import *  # noqa: F403
