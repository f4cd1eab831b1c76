"""The cases of Media Cloud's date_guesser test suite, in its URL forms and page snippets, with the answer
topicmap gives them (tests/test_dates.py asserts them; benchmarks/eval_dates.py scores them in two halves).

Each case is a URL and a page; ``expected`` is the publisher's day, or None where the right answer is no date.
``month_only`` marks a case whose evidence is a year and a month: the guess stores the month's 15th and says
so in its method (see topicmap.web.dates). The hosts and slugs are invented; the date forms are date_guesser's.
"""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import date

# A page that states no date anywhere: the URL alone decides.
NO_DATE_PAGE = "<could be anything></could>"
IMAGE_PAGE = (
    '<html><head><meta property="og:image" content="cdn.example.com/2017/10/13/whatever.jpg"/></head></html>'
)
# A page whose markup states a date: an undateable URL must still give none.
DATED_PAGE = (
    '<html><head><meta property="article:published_time" content="2017-10-13T04:56:54-04:00"></head></html>'
)
# Both <time> elements carry impossible datetime attributes (month 26, month 17); the visible text is right.
MALFORMED_TIME_PAGE = """<html><header><div class="dateline">
<p>Published <time datetime="2015-26-26T04:03:40Z" pubdate>Thursday, Mar. 26 2015, 12:26 AM EDT</time></p>
<p>Last updated <time class="updated" datetime="2015-17-26T11:03:42Z" pubdate>Thursday, Mar. 26 2015,
7:17 AM EDT</time></p></div></header></html>"""


@dataclass(frozen=True)
class DateCase:
    name: str
    url: str | None
    html: str
    expected: date | None
    month_only: bool = False

    @property
    def half(self) -> str:
        """``tuning`` or ``held-out``, fixed by the first byte of sha256(name): even tunes, odd is held out."""
        return ("tuning", "held-out")[hashlib.sha256(self.name.encode("utf-8")).digest()[0] % 2]


DATE_GUESSER_CASES: tuple[DateCase, ...] = (
    # full dates in the URL path
    DateCase("url y/m/d", "http://www.example.com/2013/12/17/politics/senate/index.html?hpt=1", NO_DATE_PAGE, date(2013, 12, 17)),
    DateCase("url m/d/y", "http://www.example.com/12/17/2013/politics/senate/index.html?hpt=1", NO_DATE_PAGE, date(2013, 12, 17)),
    DateCase("url yyyymmdd", "http://www.example.com/20131216/album-review_n_4453500.html", NO_DATE_PAGE, date(2013, 12, 16)),
    DateCase("url mon/d/y leap day", "http://www.example.com/Feb/29/2012/album-review_n_4453500.html", NO_DATE_PAGE, date(2012, 2, 29)),
    # year and month only
    DateCase("url y/m", "http://www.example.com/local/2015/10/jim_webb", NO_DATE_PAGE, date(2015, 10, 15), True),
    DateCase("url y-m file", "http://example.org/1/files/2016-02/ohio-FY2014-15-budget.pdf#page=5", NO_DATE_PAGE, date(2016, 2, 15), True),
    DateCase("url sept/y", "http://www.example.com/sept/2013/album-review_n_4453500.html", NO_DATE_PAGE, date(2013, 9, 15), True),
    DateCase("url y/mon", "http://www.example.com/2013/jan/album-review_n_4453500.html", NO_DATE_PAGE, date(2013, 1, 15), True),
    # what must not read as a date
    DateCase("year in the host", "http://candidate2016.example.com/3385-2/", NO_DATE_PAGE, None),
    DateCase("id 198781", "http://www.example.co/libro-198781", NO_DATE_PAGE, None),
    DateCase("id 205081", "http://www.example.co/libro-205081", NO_DATE_PAGE, None),
    DateCase("id of nine digits", "http://www.example.co/libro-201008012", NO_DATE_PAGE, None),
    DateCase("month 13", "http://www.example.com/2013/13/22/album-review_n_4453500.html", NO_DATE_PAGE, None),
    DateCase("day 32", "http://www.example.com/2013/01/32/album-review_n_4453500.html", NO_DATE_PAGE, None),
    DateCase("feb 29 of 2013", "http://www.example.com/2013/02/29/album-review_n_4453500.html", NO_DATE_PAGE, None),
    # URL and page together
    DateCase("nothing anywhere", "https://www.example.com/opinion/catalonia-spain.html", NO_DATE_PAGE, None),
    DateCase("url day, empty page", "https://www.example.com/2017/10/13/opinion/catalonia-spain.html", NO_DATE_PAGE, date(2017, 10, 13)),
    DateCase("url day and markup", "https://www.example.com/2017/10/13/opinion/catalonia-spain.html", DATED_PAGE, date(2017, 10, 13)),
    DateCase("og:image alone", None, IMAGE_PAGE, date(2017, 10, 13)),
    DateCase("og:image refines the url month", "https://www.example.com/2017/10/opinion/catalonia.html", IMAGE_PAGE, date(2017, 10, 13)),
    DateCase("url month over another og:image", "https://www.example.com/2018/10/opinion/catalonia.html", IMAGE_PAGE, date(2018, 10, 15), True),
    DateCase("wikipedia with a dated path", "https://en.wikipedia.org/2018/10/13/opinion/catalonia.html", IMAGE_PAGE, None),
    DateCase("impossible time datetime", "https://example.com/opinion/catalonia-spain.html", MALFORMED_TIME_PAGE, date(2015, 3, 26)),
    DateCase("nothing anywhere, twice", "https://www.example.com/opinion/spain-catalonia.html", NO_DATE_PAGE, None),
    # undateable URLs, though the page states a date
    DateCase("no hostname", "/foo/bar/baz.html", DATED_PAGE, None),
    DateCase("any wikipedia subdomain", "https://new.project.in.en.wikipedia.org/other_stuff", DATED_PAGE, None),
    DateCase("twitter front page", "https://twitter.com/", DATED_PAGE, None),
    DateCase("twitter user feed", "https://mobile.twitter.com/somepaper", DATED_PAGE, None),
    DateCase("twitter hashtag", "https://twitter.com/hashtag/SomeForum", DATED_PAGE, None),
    DateCase("front page", "https://foo.example.com/", DATED_PAGE, None),
    DateCase("search page", "https://www.example.es/search?q=chocolate", DATED_PAGE, None),
    DateCase("tag page", "http://www.example.com/tag/some-act", DATED_PAGE, None),
)  # fmt: skip
