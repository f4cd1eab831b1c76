"""The demo topic's post source: a small generic-post CSV (Media Cloud's columns) whose posts share demo stories.

Five made-up authors post about the demo subject's stories, some already in the archive, some only the spider
finds: each shared story a few hours after it was published, by one to three authors, a few of the posts in a
channel of their own. ``make demo`` writes the file next to its other files and declares it as the demo topic's
``posts:`` source, so the snapshot's ``post_count``, ``author_count`` and ``channel_count`` are filled.
"""

from __future__ import annotations

import csv
import io
from datetime import datetime, timedelta
from pathlib import Path

from topicmap.demo.web import DEMO_SUBJECT, DemoWeb

#: the made-up authors, and the channel each posts in when not its own
DEMO_POST_AUTHORS: tuple[tuple[str, str], ...] = (
    ("ana_sky", ""),
    ("ben_grid", "energy-desk"),
    ("carla_k", ""),
    ("dev_notes", "energy-desk"),
    ("eco_watch", ""),
)
#: stories shared (every STEP-th story of the subject, by URL)
DEMO_SHARED_STORIES = 24
STEP = 7


def demo_posts(web: DemoWeb, subject: str = DEMO_SUBJECT) -> list[dict[str, str]]:
    """The posts: content, author, publish_date, channel, post_id (Media Cloud's generic-post columns)."""
    stories = sorted(
        (story for story in web.stories if story.subject == subject and story.hop_depth is not None),
        key=lambda story: story.url,
    )[::STEP][:DEMO_SHARED_STORIES]
    if not stories:
        return []
    last = datetime.combine(web.end, datetime.max.time()).replace(tzinfo=stories[0].publish_date.tzinfo)
    posts = []
    for i, story in enumerate(stories):
        for j in range(1 + i % 3):  # one to three authors per story
            author, channel = DEMO_POST_AUTHORS[(i + 2 * j) % len(DEMO_POST_AUTHORS)]
            when = min(story.publish_date + timedelta(hours=1 + 5 * j + i % 4), last)
            posts.append(
                {
                    "content": f"{subject} read: {story.title} {story.url}",
                    "author": author,
                    "publish_date": when.strftime("%Y-%m-%dT%H:%M:%SZ"),
                    "channel": channel if (i + j) % 2 else "",
                    "post_id": f"demo-{i}-{j}",
                }
            )
    return posts


def write_demo_posts(web: DemoWeb, path: Path, subject: str = DEMO_SUBJECT) -> Path:
    """Write ``demo_posts`` as a generic-post CSV at ``path``."""
    out = io.StringIO()
    writer = csv.DictWriter(
        out, fieldnames=["content", "author", "publish_date", "channel", "post_id"], lineterminator="\n"
    )
    writer.writeheader()
    writer.writerows(demo_posts(web, subject))
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(out.getvalue(), encoding="utf-8")
    return path
