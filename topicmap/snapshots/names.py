"""The snapshot stage's names, free of heavy imports: the Dagster layer declares its config and asset checks with
them when the code location loads, long before any snapshot is computed (which pulls in pandas, pyarrow,
matplotlib and networkx)."""

#: the kinds of timespan a snapshot is split into
PERIODS: tuple[str, ...] = ("overall", "monthly", "weekly", "custom")
#: Periods whose timespans get a rendered PNG by default. A weekly picture costs ~0.5-3 s each (a topic of
#: four months has ~17 weeks); every timespan always gets its GEXF.
DEFAULT_PICTURE_PERIODS: tuple[str, ...] = ("overall", "monthly", "custom")

# The consistency checks (asset check names); snapshot_problems' messages are sorted into them.
CHECK_LINK_COUNTS = "medium_link_counts_match_story_links"
CHECK_TOPIC_STORIES = "counted_stories_are_topic_stories"
CHECK_DATES = "timespans_within_topic_dates"
CHECK_NAMES: tuple[str, ...] = (CHECK_LINK_COUNTS, CHECK_TOPIC_STORIES, CHECK_DATES)
