"""Property tests: every public function of the web-reading library takes any str/bytes without raising,
and the URL normalizations keep their promises (idempotent keys, valid output) on generated URLs."""

from __future__ import annotations

import string

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from topicmap.web import extract, links, media, urls
from topicmap.web.extract import ExtractedStory

FAST = settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
SLOW = settings(max_examples=25, deadline=None, suppress_health_check=[HealthCheck.too_slow])

anything = st.one_of(st.none(), st.text(max_size=300), st.binary(max_size=300))

# URL-ish strings: mostly http(s) with odd hosts, ports, userinfo, escapes, IDNs and junk around them.
host_label = st.text(alphabet=string.ascii_letters + string.digits + "-_éü中ß", min_size=1, max_size=20)
url_like = st.builds(
    lambda scheme, userinfo, labels, port, path, query, fragment: (
        f"{scheme}{userinfo}{'.'.join(labels)}{port}{path}{query}{fragment}"
    ),
    st.sampled_from(["http://", "https://", "HTTP://", "//", "", "ftp://", "http:/", "http://http://"]),
    st.sampled_from(["", "user@", "user:pw@", "@", ":@"]),
    st.lists(host_label, min_size=1, max_size=4),
    st.sampled_from(["", ":80", ":443", ":8080", ":", ":99999", ":x"]),
    st.text(alphabet=string.printable + "é%/€", max_size=40).map(lambda text: "/" + text),
    st.sampled_from(["", "?", "?a=1", "?utm_source=x&b=2", "?=x", "?a=&b", "?v=ID&feature=share"]),
    st.sampled_from(["", "#", "#frag"]),
)
url_inputs = st.one_of(anything, url_like)

html_like = st.one_of(
    anything,
    st.builds(
        lambda tag, text, attribute: (
            f"<html><head><title>{text}</title></head><body><{tag} {attribute}>"
            f"{text}</{tag}><a href='{text}'>{text}</a><iframe src='//youtube.com/embed/{text}'></iframe></body></html>"
        ),
        st.sampled_from(["p", "div", "article", "script", "h1", "meta", "time"]),
        st.text(max_size=80),
        st.sampled_from(["", "itemprop='datePublished' datetime='2020-01-01'", "lang='de'", "charset='x'"]),
    ),
)


@FAST
@given(url_inputs)
def test_url_functions_never_raise(url: object) -> None:
    for function in (
        urls.normalize_url,
        urls.normalize_url_lossy,
        urls.fix_common_url_mistakes,
        urls.distinctive_domain,
    ):
        result = function(url)  # type: ignore[arg-type]
        assert result is None or isinstance(result, str)
    for predicate in (urls.is_http_url, urls.is_shortened_url, urls.is_homepage_url, links.is_ignored_url):
        assert isinstance(predicate(url), bool)  # type: ignore[arg-type]
    assert isinstance(urls.url_variants(url, url, url), list)  # type: ignore[arg-type]
    assert media.medium_url_and_name(url) is None or isinstance(media.medium_url_and_name(url), tuple)  # type: ignore[arg-type]
    assert isinstance(links.is_self_link(url, url), bool)  # type: ignore[arg-type]
    assert isinstance(links.skip_self_link(url, url, 0), bool)  # type: ignore[arg-type]


@FAST
@given(url_inputs)
def test_normalized_urls_are_valid_and_stable(url: object) -> None:
    strict = urls.normalize_url(url)  # type: ignore[arg-type]
    if strict is not None:
        assert urls.is_http_url(strict)
        assert urls.normalize_url(strict) == strict
    lossy = urls.normalize_url_lossy(url)  # type: ignore[arg-type]
    if lossy is not None:
        assert lossy.startswith("http://")
        assert lossy == lossy.lower()
        assert urls.normalize_url_lossy(lossy) == lossy


@FAST
@given(url_like)
def test_medium_is_the_lossy_host(url: str) -> None:
    medium = media.medium_url_and_name(url)
    if medium is not None:
        medium_url, name = medium
        assert medium_url == f"http://{name}/"
        assert urls.normalize_url_lossy(url).startswith(f"http://{name}")  # type: ignore[union-attr]


@SLOW
@given(html_like, url_inputs)
def test_page_functions_never_raise(html: object, url: object) -> None:
    story = extract.extract_story(html, url)  # type: ignore[arg-type]
    assert isinstance(story, ExtractedStory)
    assert story.publish_date is None or story.publish_date.tzinfo is not None
    assert isinstance(links.extract_links(html, url), list)  # type: ignore[arg-type]
    title = extract.page_title(html)  # type: ignore[arg-type]
    assert title is None or (isinstance(title, str) and len(title) <= 1024)
    if isinstance(html, bytes):
        assert isinstance(extract.decode_html(html, url if isinstance(url, str) else None), str)
    language = extract.guess_language(html if isinstance(html, str) else None)
    assert language is None or (len(language) == 2 and language.isalpha())


@SLOW
@given(
    st.binary(min_size=1, max_size=2000), st.sampled_from([None, "utf-8", "latin-1", "shift_jis", "bogus"])
)
def test_decode_html_any_bytes(content: bytes, charset: str | None) -> None:
    assert isinstance(extract.decode_html(content, charset), str)
