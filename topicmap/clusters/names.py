"""The clusters stage's names, free of heavy imports: the Dagster layer declares its config with them when the
code location loads, long before any story is clustered (which pulls in scikit-learn, scipy and pandas)."""

#: fewer stories than this are not clustered (a topic's whole set, or the first week a stream starts with)
MIN_STORIES = 10
