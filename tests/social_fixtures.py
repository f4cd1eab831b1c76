"""Shared set-up for the social-metrics tests: topic stories in a store, the API stand-in, Dagster resources."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path
from typing import Any

from sqlalchemy import select

from resources.social import BitlyResource, FacebookResource
from resources.store import TopicStoreResource
from topicmap.demo.standins import StandinDataset, StandinServer
from topicmap.store import schema as s
from topicmap.store.topic_store import NewStory, TopicStore, now_utc
from topicmap.topics.declarations import TopicConfig

TOPIC = TopicConfig(name="climate", query="climate", start_date=date(2024, 1, 1), end_date=date(2024, 3, 31))


def at(day: date, hour: int = 0, minute: int = 0) -> datetime:
    return datetime(day.year, day.month, day.day, hour, minute, tzinfo=UTC)


def story_url(day: date, index: int) -> str:
    return f"https://news.example.com/{day:%Y/%m/%d}/climate-story-{index}"


def add_topic_stories(
    store: TopicStore,
    stories: list[NewStory],
    topic: TopicConfig = TOPIC,
    redirects: dict[str, str] | None = None,
    extra_urls: dict[str, str] | None = None,
) -> dict[str, int]:
    """Add stories and make them topic stories; optional redirect URL (topic_stories) and extra story_urls row."""
    topics_id = store.upsert_topic(topic)
    ids = store.add_stories(stories, source="test").stories_ids
    by_url = {story.url: sid for story, sid in zip(stories, ids, strict=True)}
    redirects, extra_urls = redirects or {}, extra_urls or {}
    with store.engine.begin() as conn:
        store.insert_ignore(
            conn,
            s.topic_stories,
            [
                {
                    "topics_id": topics_id,
                    "stories_id": sid,
                    "redirect_url": redirects.get(url),
                    "added_at": now_utc(),
                }
                for url, sid in by_url.items()
            ],
            ["topics_id", "stories_id"],
        )
        store.insert_ignore(
            conn,
            s.story_urls,
            [{"stories_id": by_url[url], "url": extra} for url, extra in extra_urls.items()],
            ["stories_id", "url"],
        )
    return by_url


def add_plain_story(
    store: TopicStore, url: str, published: datetime | None, collected: datetime | None = None
) -> int:
    """A story that belongs to no topic."""
    return store.add_stories(
        [NewStory(url, "t", "x", published, collect_date=collected)], source="test"
    ).stories_ids[0]


def week_of_stories(first_day: date, days: int, per_day: int) -> list[NewStory]:
    """``per_day`` stories on each of ``days`` days, published at 06:00 + 5 h × index (UTC)."""
    return [
        NewStory(
            story_url(first_day + timedelta(days=d), i),
            f"Climate story {d}-{i}",
            "climate text",
            at(first_day + timedelta(days=d), 6 + 5 * i),
        )
        for d in range(days)
        for i in range(per_day)
    ]


def dataset_for(
    stories: list[NewStory], bitlink_counts: dict[str, int] | None = None, seed: int = 5
) -> StandinDataset:
    return StandinDataset.from_urls(
        [story.url for story in stories],
        seed=seed,
        publish_date={story.url: story.publish_date for story in stories if story.publish_date},
        bitlink_counts=bitlink_counts,
    )


def social_resources(server: StandinServer, db_url: str, tmp_path: Path, **overrides: Any) -> dict[str, Any]:
    dataset = server.dataset
    return {
        "store": TopicStoreResource(database_url=db_url),
        "bitly": BitlyResource(
            token=overrides.pop("bitly_token", dataset.bitly_token),
            base_url=server.base_url_bitly,
            raw_store_dir=str(tmp_path / "raw"),
            backoff_seconds=0,
        ),
        "facebook": FacebookResource(
            app_id=dataset.facebook_app_id,
            app_secret=overrides.pop("app_secret", dataset.facebook_app_secret),
            base_url=server.base_url_facebook,
            retry_wait_seconds=0,
            max_attempts=overrides.pop("max_attempts", 4),
        ),
    }


def click_table(store: TopicStore) -> dict[int, dict[str, Any]]:
    with store.engine.connect() as conn:
        return {row.stories_id: dict(row._mapping) for row in conn.execute(select(s.bitly_clicks_total))}


def click_instance():  # noqa: ANN201 - a dg.DagsterInstance (dagster loads with the test)
    """An ephemeral Dagster instance holding TOPIC's publication days (and weeks, CC-NEWS days), as the topic
    registry adds them."""
    import dagster as dg

    from assets.partitions import apply_calendar

    instance = dg.DagsterInstance.ephemeral()
    apply_calendar(instance, [TOPIC], date(2024, 12, 31))
    return instance
