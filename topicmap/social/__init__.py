"""Social metrics: Bit.ly click totals (refetched 3 and 30 days after publication) and Facebook engagement.

- ``clicks``: when click totals are due, over which window, and how they add up; ``refetch``: which
  publication days have a stage due (what the click sensors request).
- ``bitly`` and ``facebook``: the API clients; ``http``: their shared HTTP helpers (secrets never logged);
  ``rawstore``: every raw API answer kept, so figures can be recomputed without refetching.
- ``store``: the topic-store reads and writes of click totals and story statistics.
- ``fetching``: the fetch loops (a range of days' click totals, a topic's Facebook statistics): written in
  batches, stopped by errors no later story would get past.
"""
