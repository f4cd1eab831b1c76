"""Stable import path for :mod:`topicmap.social.clicks` (Bit.ly click totals); new code imports that module."""

from topicmap.social.clicks import *  # noqa: F403
