"""Stable import path for :mod:`topicmap.dedup.simhash` (simhash fingerprints); new code imports that module."""

from topicmap.dedup.simhash import *  # noqa: F403
