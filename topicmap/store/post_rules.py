"""How a topic's posts count in its snapshots, free of heavy imports: the topic declarations
(topicmap.topics.post_sources) check ``mode`` and ``bot_policy`` against these, the snapshots
(topicmap.snapshots.post_counts) apply them."""

from __future__ import annotations

import math

#: how a topic's timespans take their stories: ``web`` (the stories published in them, and those they link to)
#: or ``url_sharing`` (the stories shared by the posts published in them)
TOPIC_MODES = ("web", "url_sharing")
#: Media Cloud's bot policies ('all', 'no bots', 'only bots'): which posts the snapshot counts
BOT_POLICIES = ("all", "no_bots", "only_bots")
#: Media Cloud's bot rule: an author with at least this many posts in one post source (seed query) ...
BOT_MIN_POSTS = 100
#: ... or at least this share of the source's posts, whichever is larger, is a bot
BOT_SHARE = 0.01


def bot_threshold(query_posts: int) -> int:
    """Posts from which an author of a post source with ``query_posts`` posts is a bot: max(100, 1 %)."""
    return max(BOT_MIN_POSTS, math.ceil(BOT_SHARE * query_posts))
