"""Posts as seeds: post sources declared in topics.yaml, the three dump formats read from real files within bounds,
posts kept with their shared URLs, those URLs made seeds; bad rows, dates and re-reading; SQLite and PostgreSQL."""

from __future__ import annotations

import json
from datetime import UTC, date, datetime
from pathlib import Path

import dagster as dg
from sqlalchemy import select

from assets.seeds import seeds
from resources.store import TopicStoreResource
from resources.topics import TopicsFileResource
from topicmap.archive.warc import ReadLimits
from topicmap.store import schema as s
from topicmap.store.topic_store import TopicStore
from topicmap.topics.declarations import TopicConfig, load_topics
from topicmap.topics.post_sources import PostSource
from topicmap.topics.posts import import_posts, post_rows
from topicmap.topics.seeding import SeedingRequest, select_seeds

# 2026-01-06 00:00:00 UTC and 2026-06-01 (after the topic's dates), as Pushshift writes them
JAN_6 = int(datetime(2026, 1, 6, tzinfo=UTC).timestamp())
JUNE_1 = int(datetime(2026, 6, 1, tzinfo=UTC).timestamp())

GENERIC_CSV = """content,author,publish_date,channel,post_id
"Climate report: https://news.test/a, read it.",alice,2026-01-05,,p1
carbon tax https://news.test/b https://news.test/a,bob,2026-01-31T23:59:59Z,bobs-channel,p2
climate on the last day,carol,2026-04-30T23:00:00+00:00,,p3
climate too late https://news.test/late,dave,2026-05-01,,p4
not a date https://news.test/x,erin,last tuesday,,p5
,,2026-01-05,,p6
football https://news.test/sport,frank,2026-01-07,,p7
"""

REDDIT_LINES = [
    {
        "id": "s1",
        "author": "u1",
        "created_utc": JAN_6,
        "subreddit": "climate",
        "title": "Climate &amp; the carbon budget",
        "selftext": "More: https://news.test/c?x=1&amp;y=2 and [here](https://news.test/d)",
        "url": "https://news.test/linked",
        "is_self": False,
        "permalink": "/r/climate/comments/s1/climate/",
    },
    {  # a self post: its url is the thread itself, and a link to reddit is not a shared URL
        "id": "s2",
        "author": "u2",
        "created_utc": str(JAN_6),
        "subreddit": "climate",
        "title": "climate question",
        "selftext": "see https://www.reddit.com/r/climate/comments/zz/ and https://i.redd.it/pic.jpg",
        "url": "https://www.reddit.com/r/climate/comments/s2/q/",
        "is_self": True,
    },
    {
        "id": "c1",
        "author": "u3",
        "created_utc": JAN_6,
        "subreddit": "news",
        "body": "climate: https://news.test/e",
    },
    {
        "id": "c2",
        "author": "u4",
        "created_utc": JUNE_1,
        "subreddit": "news",
        "body": "climate https://news.test/f",
    },
    {"id": "c3", "author": "u5", "subreddit": "news", "body": "climate, no date"},
    {"id": "x1", "author": "u6", "created_utc": JAN_6, "subreddit": "news"},
]

TWEET_PAGE = {
    "data": [
        {
            "id": "101",
            "text": "climate https://t.co/aaa https://t.co/pic",
            "created_at": "2026-02-01T10:00:00.000Z",
            "author_id": "9",
            "entities": {
                "urls": [
                    {
                        "url": "https://t.co/aaa",
                        "expanded_url": "https://bit.ly/3xyz",
                        "unwound_url": "https://news.test/g",
                    },
                    {
                        "url": "https://t.co/pic",
                        "expanded_url": "https://twitter.com/nine/status/101/photo/1",
                    },
                ]
            },
        },
        {"id": "102", "created_at": "2026-02-01T11:00:00Z", "author_id": "9", "text": "carbon"},
        {"id": "103", "text": "climate, no author", "created_at": "2026-02-01T11:00:00Z"},
    ],
    "includes": {"users": [{"id": "9", "username": "nine"}]},
}
# a tweet object on its own line, without entities: the URLs of its text (a shortener, followed by the spider)
TWEET_LINE = {
    "id": "104",
    "text": "emissions climate https://t.co/bbb",
    "created_at": "2026-03-01T00:00:00Z",
    "author_id": "7",
}


def _topic(
    tmp_path: Path, posts: str, name: str = "climate", query: str = "climate OR carbon"
) -> TopicConfig:
    (tmp_path / "topics.yaml").write_text(
        f"""topics:
  - name: {name}
    query: '{query}'
    start_date: 2026-01-01
    end_date: 2026-04-30
    posts: {posts}
""",
        encoding="utf-8",
    )
    loaded = load_topics(tmp_path / "topics.yaml")
    assert not loaded.errors, loaded.errors
    return loaded.topics[0]


def _ndjson(path: Path, records: list[dict], extra_lines: tuple[str, ...] = ()) -> Path:
    lines = [json.dumps(record) for record in records] + list(extra_lines)
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return path


def _seed(store: TopicStore, topic: TopicConfig) -> tuple[int, object]:
    topics_id = store.upsert_topic(topic)
    selection = select_seeds(store, SeedingRequest(topic, topics_id=topics_id))
    store.add_seed_urls(topics_id, selection.rows)
    return topics_id, selection


# ---------------------------------------------------------------------------------------------- declarations


def test_post_sources_are_declared_per_topic_and_mistakes_name_topic_and_field(tmp_path: Path) -> None:
    (tmp_path / "topics.yaml").write_text(
        """topics:
  - name: good
    query: climate
    start_date: 2026-01-01
    posts:
      - {platform: generic_post, path: posts.csv}
      - {platform: twitter, path: /data/tweets, assume_match: true, match_query: false}
  - name: unknown-platform
    query: climate
    start_date: 2026-01-01
    posts: [{platform: mastodon, path: toots.jsonl}]
  - name: no-path
    query: climate
    start_date: 2026-01-01
    posts: [{platform: reddit}]
  - name: typo
    query: climate
    start_date: 2026-01-01
    posts: [{platform: reddit, path: r.jsonl, asume_match: true}]
  - name: not-a-flag
    query: climate
    start_date: 2026-01-01
    posts: [{platform: reddit, path: r.jsonl, match_query: 'no'}]
  - name: not-a-list
    query: climate
    start_date: 2026-01-01
    posts: {platform: reddit, path: r.jsonl}
""",
        encoding="utf-8",
    )
    loaded = load_topics(tmp_path / "topics.yaml")
    assert [topic.name for topic in loaded.topics] == ["good"]
    assert loaded.topics[0].posts == (
        PostSource("generic_post", tmp_path / "posts.csv"),
        PostSource("twitter", Path("/data/tweets"), assume_match=True, match_query=False),
    )
    problems = {error.topic: (error.field, error.problem) for error in loaded.errors}
    assert problems["unknown-platform"][0] == "posts[0].platform"
    assert "mastodon" in problems["unknown-platform"][1] and "generic_post" in problems["unknown-platform"][1]
    assert problems["no-path"][0] == "posts[0].path"
    assert problems["typo"][0] == "posts[0].asume_match"
    assert problems["not-a-flag"] == ("posts[0].match_query", "expected true or false, got 'no'")
    assert problems["not-a-list"][0] == "posts"


def test_a_topic_without_posts_keeps_its_config_hash(tmp_path: Path) -> None:
    topic = _topic(tmp_path, "[]")
    assert "posts" not in json.loads(topic.to_json())
    with_posts = _topic(tmp_path, "[{platform: reddit, path: r.jsonl}]")
    assert json.loads(with_posts.to_json())["posts"][0]["platform"] == "reddit"
    assert with_posts.config_hash != topic.config_hash


# ---------------------------------------------------------------------------------------------- the three formats


def test_generic_post_csv_posts_and_their_urls_become_seeds(store: TopicStore, tmp_path: Path) -> None:
    (tmp_path / "posts.csv").write_text(GENERIC_CSV, encoding="utf-8")
    topic = _topic(tmp_path, "[{platform: generic_post, path: posts.csv}]")
    topics_id, selection = _seed(store, topic)

    [report] = selection.posts
    assert report.counts() == {
        "source": "generic_post:posts.csv",
        "files": 1,
        "posts_read": 5,  # p1, p2, p3, p4, p7; p5 and p6 are bad rows
        "posts_kept": 3,
        "posts_new": 3,
        "out_of_dates": 1,  # p4, the day after the topic's last
        "not_matching_query": 1,  # p7, about football
        "bad_rows": 2,
        "file_errors": 0,
        "urls_found": 2,
        "urls_refused": 0,
    }
    assert [str(error) for error in report.errors] == [
        f"{tmp_path / 'posts.csv'}:6: publish_date 'last tuesday' is not a date like 2026-01-31 or "
        "2026-01-31T12:00:00Z",
        f"{tmp_path / 'posts.csv'}:7: author is missing or empty",
    ]
    posts = {post["post_id"]: post for post in post_rows(store, topics_id)}
    assert set(posts) == {"p1", "p2", "p3"}
    # channel defaults to the author (Media Cloud's generic_post rule); dates are UTC instants
    assert (posts["p1"]["author"], posts["p1"]["channel"]) == ("alice", "alice")
    assert posts["p2"]["channel"] == "bobs-channel"
    assert posts["p2"]["publish_date"] == datetime(2026, 1, 31, 23, 59, 59, tzinfo=UTC)
    assert posts["p1"]["urls"] == ["https://news.test/a"]  # the comma and the period are not part of it
    assert sorted(posts["p2"]["urls"]) == ["https://news.test/a", "https://news.test/b"]
    assert posts["p3"]["urls"] == []
    assert json.loads(posts["p2"]["data"])["author"] == "bob"

    seeds_by_url = {row["url"]: row for row in store.seed_rows(topics_id)}
    assert set(seeds_by_url) == {"https://news.test/a", "https://news.test/b"}
    seed = seeds_by_url["https://news.test/a"]
    assert seed["source"] == "generic_post:posts.csv" and seed["assume_match"] is False
    with store.engine.connect() as conn:
        query = conn.execute(select(s.topic_seed_queries)).mappings().one()
        post_url = (
            conn.execute(
                select(s.topic_post_urls).where(
                    s.topic_post_urls.c.topic_post_urls_id == seed["topic_post_urls_id"]
                )
            )
            .mappings()
            .one()
        )
    assert (query["platform"], query["source"], query["query"]) == (
        "generic_post",
        "csv",
        str(tmp_path / "posts.csv"),
    )
    assert query["imported_date"] is not None
    assert seed["topic_seed_queries_id"] == query["topic_seed_queries_id"]
    assert post_url["url"] == "https://news.test/a"


def test_generic_posts_without_post_id_are_the_same_posts_when_read_again(
    store: TopicStore, tmp_path: Path
) -> None:
    (tmp_path / "posts.csv").write_text(
        "content,author,publish_date\nclimate https://news.test/a,alice,2026-01-05\n"
        "climate https://news.test/a,alice,2026-01-06\n",
        encoding="utf-8",
    )
    topic = _topic(tmp_path, "[{platform: generic_post, path: posts.csv}]")
    topics_id, first = _seed(store, topic)
    _, second = _seed(store, topic)
    assert first.posts[0].posts_new == 2 and second.posts[0].posts_new == 0
    assert store.table_count(s.topic_posts) == 2 and store.table_count(s.topic_post_urls) == 2
    assert store.table_count(s.topic_seed_urls) == 1


def test_reddit_submissions_and_comments_from_a_pushshift_dump(store: TopicStore, tmp_path: Path) -> None:
    _ndjson(tmp_path / "reddit.jsonl", REDDIT_LINES, extra_lines=("", "{not json", "[1, 2]"))
    topic = _topic(tmp_path, "[{platform: reddit, path: reddit.jsonl}]")
    topics_id, selection = _seed(store, topic)

    [report] = selection.posts
    assert (report.posts_read, report.posts_kept, report.out_of_dates, report.bad_rows) == (4, 3, 1, 4)
    path = tmp_path / "reddit.jsonl"
    assert [str(error) for error in report.errors] == [
        f"{path}:5: created_utc None is not a time in seconds since 1970",
        f"{path}:6: neither a submission (title) nor a comment (body)",
        f"{path}:8: not JSON: Expecting property name enclosed in double quotes at column 2",
        f"{path}:9: expected a JSON object, got a list",
    ]
    posts = {post["post_id"]: post for post in post_rows(store, topics_id)}
    assert set(posts) == {"s1", "s2", "t1_c1"}
    submission = posts["s1"]
    assert submission["content"] == (
        "Climate & the carbon budget More: https://news.test/c?x=1&y=2 and [here](https://news.test/d)"
    )
    assert (submission["author"], submission["channel"]) == ("u1", "climate")
    assert submission["publish_date"] == datetime(2026, 1, 6, tzinfo=UTC)
    assert submission["url"] == "https://www.reddit.com/r/climate/comments/s1/climate/"
    assert sorted(submission["urls"]) == [
        "https://news.test/c?x=1&y=2",
        "https://news.test/d",
        "https://news.test/linked",
    ]
    assert posts["s2"]["urls"] == []  # a self post: its links lead to reddit itself
    assert posts["t1_c1"]["urls"] == ["https://news.test/e"] and posts["t1_c1"]["channel"] == "news"
    assert {row["url"] for row in store.seed_rows(topics_id)} == {
        "https://news.test/c?x=1&y=2",
        "https://news.test/d",
        "https://news.test/linked",
        "https://news.test/e",
    }


def test_tweets_as_api_v2_pages_and_objects_share_their_expanded_urls(
    store: TopicStore, tmp_path: Path
) -> None:
    folder = tmp_path / "tweets"
    folder.mkdir()
    _ndjson(folder / "page-1.jsonl", [TWEET_PAGE])
    _ndjson(folder / "page-2.ndjson", [TWEET_LINE])
    (folder / "notes.txt").write_text("not a dump\n", encoding="utf-8")
    (folder / ".partial.jsonl").write_text("{broken", encoding="utf-8")  # a download in progress
    topic = _topic(tmp_path, "[{platform: twitter, path: tweets, assume_match: true}]")
    topics_id, selection = _seed(store, topic)

    [report] = selection.posts
    assert (report.files, report.posts_read, report.posts_kept, report.bad_rows) == (2, 3, 3, 1)
    assert (
        str(report.errors[0])
        == f"{folder / 'page-1.jsonl'}:1: tweet 3 of the line's data: author_id is missing or empty"
    )
    posts = {post["post_id"]: post for post in post_rows(store, topics_id)}
    assert posts["101"]["author"] == posts["101"]["channel"] == "nine"  # the username of includes.users
    assert posts["101"]["url"] == "https://twitter.com/nine/status/101"
    assert posts["101"]["urls"] == [
        "https://news.test/g"
    ]  # unwound; the photo's twitter.com link is not shared
    assert posts["102"]["urls"] == []
    assert posts["104"]["author"] == "7" and posts["104"]["urls"] == ["https://t.co/bbb"]
    seeds_by_url = {row["url"]: row for row in store.seed_rows(topics_id)}
    assert set(seeds_by_url) == {"https://news.test/g", "https://t.co/bbb"}
    assert all(row["assume_match"] and row["source"] == "twitter:tweets" for row in seeds_by_url.values())


def test_match_query_false_keeps_posts_that_do_not_match(store: TopicStore, tmp_path: Path) -> None:
    (tmp_path / "posts.csv").write_text(GENERIC_CSV, encoding="utf-8")
    topic = _topic(tmp_path, "[{platform: generic_post, path: posts.csv, match_query: false}]")
    topics_id, selection = _seed(store, topic)
    assert selection.posts[0].not_matching == 0 and selection.posts[0].posts_kept == 4
    assert "https://news.test/sport" in {row["url"] for row in store.seed_rows(topics_id)}


# ---------------------------------------------------------------------------------------------- bounds, sources


def test_a_line_over_the_row_limit_is_skipped_unread_and_the_file_limit_stops_reading(
    store: TopicStore, tmp_path: Path
) -> None:
    short = {
        "id": "c1",
        "author": "u",
        "created_utc": JAN_6,
        "subreddit": "r",
        "body": "climate https://news.test/1",
    }
    long = {**short, "id": "c2", "body": "climate " + "x" * 3000}
    after = {**short, "id": "c3", "body": "climate https://news.test/3"}
    _ndjson(tmp_path / "reddit.jsonl", [short, long, after])
    topic = _topic(tmp_path, "[{platform: reddit, path: reddit.jsonl}]")
    topics_id = store.upsert_topic(topic)

    limits = ReadLimits(max_row_bytes=1024, max_file_bytes=1 << 20)
    [report] = import_posts(store, topics_id, topic, limits=limits).reports
    assert (report.posts_kept, report.bad_rows, report.file_errors) == (2, 1, 0)
    assert str(report.errors[0]).endswith(
        ":2: the line is longer than 1,024 bytes (the max_row_bytes read limit): skipped unread"
    )

    # past max_file_bytes reading stops at the line where it is crossed; the posts before it are kept
    first_line = len(json.dumps(short)) + 1
    limits = ReadLimits(max_row_bytes=1 << 20, max_file_bytes=max(1024, first_line + 10))
    (tmp_path / "reddit.jsonl").write_text(
        json.dumps(short) + "\n" + json.dumps(after) * 40 + "\n", encoding="utf-8"
    )
    [report] = import_posts(store, topics_id, topic, limits=limits).reports
    assert (report.posts_read, report.file_errors) == (1, 1)
    assert "max_file_bytes" in str(report.errors[0]) and ":2:" in str(report.errors[0])
    assert [post["post_id"] for post in post_rows(store, topics_id)] == ["t1_c1", "t1_c3"]


def test_a_missing_source_is_reported_and_the_other_sources_still_seed(
    store: TopicStore, tmp_path: Path
) -> None:
    (tmp_path / "posts.csv").write_text(GENERIC_CSV, encoding="utf-8")
    (tmp_path / "big.csv").write_text(
        "content,author,publish_date\n" + "climate,a,2026-01-05\n" * 100, encoding="utf-8"
    )
    topic = _topic(
        tmp_path,
        "[{platform: reddit, path: gone.jsonl}, {platform: generic_post, path: big.csv},"
        " {platform: generic_post, path: posts.csv}]",
    )
    topics_id = store.upsert_topic(topic)
    missing, big, good = import_posts(store, topics_id, topic, limits=ReadLimits(max_file_bytes=1024)).reports
    assert missing.file_errors == 1 and str(missing.errors[0]).endswith("gone.jsonl: post source not found")
    assert big.file_errors == 1 and big.posts_read == 0 and "max_file_bytes" in str(big.errors[0])
    assert good.posts_kept == 3


def test_reseeding_the_same_files_adds_nothing_twice(store: TopicStore, tmp_path: Path) -> None:
    (tmp_path / "posts.csv").write_text(GENERIC_CSV, encoding="utf-8")
    _ndjson(tmp_path / "reddit.jsonl", REDDIT_LINES)
    # the same URL shared on two platforms is one seed
    _ndjson(tmp_path / "tweets.jsonl", [{**TWEET_LINE, "text": "climate https://news.test/a"}])
    topic = _topic(
        tmp_path,
        "[{platform: generic_post, path: posts.csv}, {platform: reddit, path: reddit.jsonl},"
        " {platform: twitter, path: tweets.jsonl}]",
    )
    topics_id, _ = _seed(store, topic)
    tables = (s.topic_seed_queries, s.topic_posts, s.topic_post_urls, s.topic_seed_urls)
    counts = [store.table_count(table) for table in tables]
    assert counts == [3, 7, 8, 6]
    _, again = _seed(store, topic)
    assert [store.table_count(table) for table in tables] == counts
    assert [report.posts_new for report in again.posts] == [0, 0, 0]
    assert [report.posts_kept for report in again.posts] == [3, 3, 1]


def test_posts_are_read_on_the_topics_dates_as_of_today_for_an_open_ended_topic(
    store: TopicStore, tmp_path: Path
) -> None:
    (tmp_path / "posts.csv").write_text(
        "content,author,publish_date\nclimate https://news.test/1,a,2026-01-05\n"
        "climate https://news.test/2,a,2026-01-20T12:00:00Z\n",
        encoding="utf-8",
    )
    (tmp_path / "topics.yaml").write_text(
        "topics:\n  - name: open\n    query: climate\n    start_date: 2026-01-01\n    end_date: open\n"
        "    posts: [{platform: generic_post, path: posts.csv}]\n",
        encoding="utf-8",
    )
    topic = load_topics(tmp_path / "topics.yaml").topics[0]
    topics_id = store.upsert_topic(topic)
    [report] = import_posts(store, topics_id, topic, today=date(2026, 1, 10)).reports
    assert (report.posts_kept, report.out_of_dates) == (1, 1)
    [report] = import_posts(store, topics_id, topic, today=date(2026, 1, 20)).reports
    assert (report.posts_kept, report.posts_new, report.out_of_dates) == (2, 1, 0)


# ---------------------------------------------------------------------------------------------- the seeds asset


def test_the_seeds_asset_reads_the_posts_and_reports_each_source(
    tmp_path: Path, sqlite_store_url: str
) -> None:
    (tmp_path / "posts.csv").write_text(GENERIC_CSV, encoding="utf-8")
    _ndjson(tmp_path / "reddit.jsonl", REDDIT_LINES)
    _topic(tmp_path, "[{platform: generic_post, path: posts.csv}, {platform: reddit, path: reddit.jsonl}]")
    db = sqlite_store_url
    resources = {
        "store": TopicStoreResource(database_url=db),
        "topics_file": TopicsFileResource(path=str(tmp_path / "topics.yaml")),
    }
    instance = dg.DagsterInstance.ephemeral()
    instance.add_dynamic_partitions("topics", ["climate"])
    for run in range(2):
        result = dg.materialize([seeds], partition_key="climate", instance=instance, resources=resources)
        meta = result.asset_materializations_for_node("seeds")[0].metadata
        assert meta["dagster/row_count"].value == 6
        assert meta["seeds_new"].value == (6 if run == 0 else 0)
        assert (meta["posts_read"].value, meta["post_urls_found"].value, meta["bad_post_rows"].value) == (
            9,
            6,
            4,
        )
        rows = {record.data["source"]: record.data for record in meta["posts"].value.records}
        assert rows["generic_post:posts.csv"]["out_of_dates"] == "1"
        assert rows["generic_post:posts.csv"]["bad_rows"] == "2"
        assert rows["reddit:reddit.jsonl"]["posts_kept"] == "3"
        assert rows["reddit:reddit.jsonl"]["posts_new"] == ("3" if run == 0 else "0")
    store = TopicStore.open(db)
    assert store.table_count(s.topic_posts) == 6
    warnings = [
        event.user_message
        for event in instance.all_logs(result.run_id)
        if event.level == 30 and "posts of" in (event.user_message or "")
    ]
    assert any("posts.csv:6: publish_date 'last tuesday'" in message for message in warnings)
