"""Tests for topicmap.topics.query: the boolean topic query language and its matching semantics."""

from __future__ import annotations

import pickle
import unicodedata

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from topicmap.topics.query import QuerySyntaxError, TopicQuery, parse
from topicmap.topics.query_text import _INVISIBLE


def hits(query: str, *texts: str) -> list[bool]:
    parsed = parse(query)
    return [parsed.matches(text) for text in texts]


# ---- terms, word boundaries, wildcards ------------------------------------------------------------


def test_term_needs_a_word_boundary_on_both_sides() -> None:
    assert hits("cat", "a cat.", "Cat!", "(CAT)", "the cat's toy") == [True] * 4
    assert hits("cat", "category", "concat", "cats", "bobcat") == [False] * 4


def test_digits_and_underscores_are_word_characters() -> None:
    assert hits("g7", "the G7 summit", "the G77 group") == [True, False]
    assert hits("foo", "foo_bar") == [False]


def test_trailing_wildcard_opens_only_the_right_side() -> None:
    assert hits("cat*", "Category", "cat", "concat", "bob cats") == [True, True, False, True]


def test_bare_star_and_star_colon_star_match_everything() -> None:
    assert hits("*", "anything", "") == [True, True]
    assert hits("*:*", "anything") == [True]
    assert hits("*:* AND NOT foo", "bar", "foo") == [True, False]


def test_hyphenated_and_slashed_words_match_as_phrases_of_their_parts() -> None:
    assert hits("covid-19", "COVID-19 cases", "covid 19", "covid-2019", "19 covid") == [
        True,
        True,
        False,
        False,
    ]
    assert hits("9/11", "after 9/11 the", "9 11", "911") == [True, True, False]


def test_apostrophes_split_words() -> None:
    ivory_coast = "Côte d’Ivoire", "COTE D'IVOIRE", "cote divoire"
    assert hits('"Cote d\'Ivoire"', *ivory_coast) == [True, True, False]
    assert hits("obama", "Obama's visit", "Obama’s visit") == [True, True]
    assert hits("obama's", "Obama’s visit", "Obama visit") == [True, False]


def test_backslash_escapes_keywords_and_syntax_characters() -> None:
    assert hits(r"\not", "not now", "now") == [True, False]
    assert hits(r"10\:30", "at 10:30 today") == [True]


# ---- phrases and proximity -------------------------------------------------------------------------


def test_phrase_needs_adjacent_words_in_order() -> None:
    texts = "Climate Change now", "climate\n  change", "climate-change", "change climate", "climate of change"
    assert hits('"climate change"', *texts) == [True, True, True, False, False]


def test_typographic_quotes_delimit_phrases() -> None:
    assert hits("“climate change” AND NOT hoax", "climate change", "change of climate") == [True, False]
    assert str(parse("“climate change”")) == '"climate change"'


def test_phrase_last_word_keeps_its_right_boundary() -> None:
    assert hits('"climate change"', "climate changes") == [False]


def test_wildcard_inside_a_phrase_is_a_prefix() -> None:
    assert hits('"clim* chang*"', "climatic changes", "climate changed", "climate", "exclimate change") == [
        True,
        True,
        False,
        False,
    ]


def test_proximity_counts_words_between_in_any_order() -> None:
    # "a b"~N: at most N other words inside the span holding all phrase words, order free.
    assert hits('"obama kenya"~2', "obama x y kenya", "kenya x y obama", "obama x y z kenya") == [
        True,
        True,
        False,
    ]
    assert hits('"obama kenya"~0', "kenya obama", "obama, kenya", "obama x kenya") == [True, True, False]
    assert hits('"a b c"~1', "c x a b", "a x b y c") == [True, False]


def test_proximity_repeated_word_needs_two_occurrences() -> None:
    assert hits('"bye bye"~1', "bye x bye", "bye") == [True, False]


def test_proximity_with_wildcard_and_cjk() -> None:
    assert hits('"nuclear deal*"~3', "deals on the nuclear program", "deals on the future of nuclear") == [
        True,
        False,
    ]
    assert hits('"中国 经济"~1', "中国的经济", "中国很大的经济") == [True, False]


# ---- boolean operators, precedence, + and - ---------------------------------------------------------


@pytest.mark.parametrize(
    "query",
    ["foo AND bar", "foo and bar", "foo AnD bar", "foo && bar", "+foo +bar", "(foo) AND (bar)"],
)
def test_and_spellings(query: str) -> None:
    assert hits(query, "bar foo", "foo", "bar") == [True, False, False]


@pytest.mark.parametrize("query", ["foo OR bar", "foo or bar", "foo || bar", "foo bar"])
def test_or_spellings_and_implicit_or(query: str) -> None:
    assert hits(query, "foo", "bar", "baz") == [True, True, False]


@pytest.mark.parametrize(
    "query", ["foo AND NOT bar", "foo AND !bar", "foo && -bar", "foo NOT bar", "foo -bar", "foo !bar"]
)
def test_not_is_enforced(query: str) -> None:
    assert hits(query, "foo", "foo bar", "bar") == [True, False, False]


def test_and_binds_tighter_than_or() -> None:
    assert hits("a OR b AND c", "a", "b", "b c") == [True, False, True]
    assert hits("a b AND c", "a", "b", "c b") == [True, False, True]
    assert hits("(a OR b) AND c", "a", "a c") == [False, True]


def test_prohibited_clause_applies_to_the_whole_or_list() -> None:
    # Lucene: "a b -c" is (a OR b) AND NOT c; "a OR NOT c" is a AND NOT c.
    assert hits("a b -c", "b", "b c", "a c") == [True, False, False]
    assert hits("a OR NOT c", "a", "a c", "x") == [True, False, False]


def test_plus_makes_optional_clauses_irrelevant() -> None:
    query = parse("foo +bar baz")
    assert [query.matches(t) for t in ("bar", "foo", "baz", "foo baz")] == [True, False, False, False]
    assert any("do not affect matching" in warning for warning in query.warnings)
    assert hits("+foo -bar", "foo", "foo bar") == [True, False]


@pytest.mark.parametrize(
    "query", ["NOT foo", "-foo", "-foo -bar", "NOT (a OR b)", "NOT a AND NOT b", "a OR (NOT b)"]
)
def test_query_that_only_excludes_is_refused(query: str) -> None:
    # Solr would read "NOT foo" as every story without foo; a topic spidered with it follows every link.
    with pytest.raises(QuerySyntaxError, match="a topic must name what it is about") as raised:
        parse(query)
    assert raised.value.position == 0


def test_negation_next_to_a_positive_clause_still_works() -> None:
    assert hits("*:* AND NOT foo", "bar", "foo") == [True, False]  # "everything" written out is allowed
    assert hits("a AND (-b)", "a", "a b") == [True, False]
    assert hits("x AND (a OR (NOT b))", "x a b", "x c", "x b") == [True, True, False]
    assert hits("NOT NOT a", "a", "b") == [True, False]


def test_nested_groups() -> None:
    query = '((iran OR iraq) AND ("nuclear deal" OR sanctions)) NOT (sports OR football)'
    texts = "Iran sanctions", "Iraq and the nuclear deal", "Iran football sanctions", "nuclear deal"
    assert hits(query, *texts) == [True, True, False, False]


def test_long_or_list_of_terms() -> None:
    query = parse(" OR ".join(f"name{i}" for i in range(300)))
    assert query.matches("news about NAME299 today")
    assert not query.matches("news about name300 and name1x")


def test_many_and_operands_do_not_blow_up() -> None:
    words = [f"w{i}" for i in range(40)]
    query = parse(" AND ".join(words))
    assert query.matches(" ".join(reversed(words)))
    assert not query.matches(" ".join(words[:-1]))


# ---- fields ------------------------------------------------------------------------------------------


def test_title_and_text_fields() -> None:
    query = parse("title:obama AND text:kenya")
    assert query.matches_story(title="Obama abroad", text="visit to Kenya")
    assert not query.matches_story(title="Kenya", text="Obama")
    assert not query.matches("Obama visits Kenya")  # no title given: title: clauses match nothing
    assert parse("visit AND NOT title:obama").matches("Obama visit")


def test_field_value_may_follow_after_whitespace_and_field_names_ignore_case() -> None:
    assert parse("title: obama").matches_story(title="Obama", text=None)
    assert parse("TITLE:obama").matches_story(title="Obama", text=None)
    assert not parse("TITLE:obama").matches("Obama")


def test_field_applies_to_groups_phrases_and_wildcards() -> None:
    query = parse('title:(kenya* OR "barack obama")')
    assert query.matches_story(title="Kenyan elections", text=None)
    assert query.matches_story(title="Barack Obama", text="")
    assert not query.matches_story(title="elections", text="Kenyan Barack Obama")
    assert parse("title:*").matches_story(title="x", text=None)
    assert not parse("title:*").matches_story(title=None, text="x")


def test_unfielded_clauses_search_every_field_but_phrases_do_not_span_fields() -> None:
    query = parse("obama AND kenya")
    assert query.matches_story(title="Obama", text="in Kenya")
    assert query.matches_story(title=None, text=None, url="https://x.test/obama-kenya", description=None)
    assert query.matches_story(title=None, text="Kenya", description="Obama")
    assert not parse('"obama kenya"').matches_story(title="news about obama", text="kenya today")


def test_matches_any_tests_the_whole_query_per_text() -> None:
    query = parse("obama AND kenya")
    assert query.matches_any(["nothing", "obama in kenya"])
    assert not query.matches_any(["obama", "kenya"])


def test_other_fields_and_ranges_are_ignored_with_warnings() -> None:
    query = parse(
        "obama AND media_id:(1 2 3) AND tags_id_media:42 AND language:en "
        "AND publish_day:[2020-01-01T00:00:00Z TO 2020-02-01T00:00:00Z]"
    )
    assert query.matches("Obama") and not query.matches("Kenya")
    assert len(query.warnings) == 4
    assert any("media_id:" in w and "position 10" in w for w in query.warnings)
    assert any("publish_day:" in w for w in query.warnings)
    assert str(query) == "obama"
    ranged = parse("obama OR text:[a TO z]")
    assert ranged.matches("obama") and not ranged.matches("kenya")
    assert ranged.warnings == ("range clause '[a TO z]' at position 14 ignored",)


def test_local_params_are_stripped() -> None:
    query = parse('{!complexphrase inOrder=false}"climat* chang*"')
    assert query.matches("climatic changes") and not query.warnings


def test_boost_is_accepted_and_fuzzy_is_matched_exactly_with_warning() -> None:
    assert hits("obama^2 OR (kenya)^0.5", "kenya") == [True]
    query = parse("obama~1")
    assert query.matches("obama") and not query.matches("obamo")
    assert "fuzzy" in query.warnings[0]


def test_query_of_only_ignored_clauses_is_rejected() -> None:
    with pytest.raises(QuerySyntaxError, match="ignored field") as error:
        parse("  media_id:1 OR language:en")
    assert error.value.position == 2


# ---- Unicode -------------------------------------------------------------------------------------------


def test_case_folding_covers_german_turkish_greek_and_full_width() -> None:
    assert hits("straße", "STRASSE", "Strasse", "Straße") == [True, True, True]
    assert hits("strasse", "Straße") == [True]
    assert hits("istanbul", "İSTANBUL", "İstanbul", "ISTANBUL") == [True, True, True]
    assert hits("kırmızı", "KIRMIZI", "kırmızı") == [True, True]
    assert hits("Οδυσσεύς", "ΟΔΥΣΣΕΎΣ") == [True]
    assert hits("finance", "ＦＩＮＡＮＣＥ", "ﬁnance") == [True, True]


def test_accents_an_unaccented_word_matches_accented_text_not_the_reverse() -> None:
    assert hits("cafe", "CAFÉ", "café", "cafe") == [True, True, True]
    assert hits("café", "CAFÉ", "cafe\u0301", "cafe") == [True, True, False]
    assert hits("resume*", "Résumés") == [True]


def test_combining_marks_are_part_of_words() -> None:
    # Devanagari vowel signs and virama are combining marks: "हि" is not a word of "हिन्दी".
    assert hits("हिन्दी", "हिन्दी भाषा") == [True]
    assert hits("हि", "हिन्दी भाषा") == [False]


def test_invisible_characters_inside_a_word_are_ignored() -> None:
    # The extracted text drops them (trafilatura keeps only printable characters) while the title keeps them:
    # the same word must match both spellings, typed either way.
    assert hits("تامینمالی", "تامین\u200cمالی", "تامینمالی") == [True, True]
    assert hits("تامین\u200cمالی", "تامینمالی", "تامین مالی") == [True, False]
    assert hits("उपाध्यक्ष", "उपाध्\u200dयक्ष") == [True]
    assert hits("president", "Presi\u00addent", "Presi\u200bdent", "\ufeffPresident\u200e") == [True] * 3


def test_the_invisible_characters_are_the_format_and_c1_control_characters() -> None:
    # The class is written out (scanning the Unicode database costs half a second): it must be exactly the
    # BMP's format characters and C1 controls, as this Python's Unicode database has them.
    expected = {
        code
        for code in range(0x80, 0x10000)
        if unicodedata.category(chr(code)) == "Cf"
        or (unicodedata.category(chr(code)) == "Cc" and not chr(code).isspace())
    }
    found = {code for code in range(0x10000) if _INVISIBLE.fullmatch(chr(code))}
    assert found == expected, sorted(found ^ expected)


def test_prefix_inside_a_phrase_spans_combining_marks_but_stops_at_logograms() -> None:
    assert hits('"हि* भाषा"', "हिन्दी भाषा", "हि-न्दी भाषा") == [True, False]
    assert hits('"x* 中"', "xy中z 中", "xyz 国中") == [True, False]
    assert hits('"clim* change"', "Climaté-change", "clim中 change") == [True, False]


def test_logograms_match_without_word_boundaries() -> None:
    assert hits("中国", "我是中国人", "中美") == [True, False]
    assert hits("オバマ", "オバマ大統領が来日") == [True]
    assert hits("สวัสดี", "คำว่าสวัสดีครับ") == [True]
    assert hits("서울", "서울에서 열린") == [True]
    assert hits("obama", "オバマ氏とObama氏") == [True]  # a Latin word next to Han keeps its boundaries
    assert hits("中国 AND NOT 美国", "中国和美国", "中国经济") == [False, True]


# ---- normalized form --------------------------------------------------------------------------------

ROUND_TRIP = [
    "a b -c",
    "x AND (a OR (NOT b))",
    'title:("barack obama" OR kenya*) AND NOT text:hoax',
    "c AND NOT (a AND b)",
    "c -a -b",
    '"a b"~3 OR covid-19 OR 中国',
    r"\and OR \or",
    "((a OR b) AND (c OR d)) OR e",
]


@pytest.mark.parametrize("query", ROUND_TRIP)
def test_str_is_readable_and_reparses_to_the_same_query(query: str) -> None:
    parsed = parse(query)
    again = parse(str(parsed))
    assert str(again) == str(parsed)
    texts = [
        "a",
        "b",
        "a c",
        "d a",
        "c d",
        "e",
        "barack obama",
        "kenyan hoax",
        "a x b",
        "covid 19",
        "中国",
        "and",
    ]
    for text in texts:
        assert again.matches_story(title=text, text=text) == parsed.matches_story(title=text, text=text), text


def test_str_shows_the_lucene_reading() -> None:
    assert str(parse("a b -c")) == "(a OR b) AND NOT c"
    assert str(parse("a OR b AND c")) == "a OR (b AND c)"
    assert str(parse('title:"Côte d\'Ivoire"~0')) == 'title:"côte d ivoire"~0'
    assert parse("Obama").source == "Obama"


# ---- errors ---------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("query", "position", "fragment"),
    [
        ("", 0, "empty query"),
        ("   ", 0, "empty query"),
        ("{!complexphrase}", 0, "empty query"),
        ("(obama AND kenya))", 17, "unbalanced ')' at position 17"),
        ("obama AND (kenya", 10, "unbalanced '('"),
        ("obama AND", 6, "'AND' at position 6 has no right-hand operand"),
        ("obama OR ) ", 6, "'OR' at position 6 has no right-hand operand"),
        ("OR obama", 0, "no left-hand operand"),
        ("(AND obama)", 1, "no left-hand operand"),
        ("obama NOT", 6, "dangling 'NOT'"),
        ("obama -", 6, "dangling '-'"),
        ("*obama", 0, "leading wildcard"),
        ("ob*ama", 2, "only supported at the end"),
        ("ob?ma", 2, "'?' wildcard"),
        ('obama "barack', 6, "unterminated quote"),
        ("/obam[a]/", 0, "regular expression"),
        ("obama OR /x/", 9, "regular expression"),
        ("()", 0, "empty parentheses"),
        ('""', 0, "empty phrase"),
        ('"!!"', 0, "phrase at position 0 has no words"),
        ("title:", 0, "has no value"),
        ("a title: OR b", 2, "has no value"),
        ('"a b"~x', 5, "whole number"),
        ('"a b"~1.5', 5, "whole number"),
        ("publish_day:[2020 TO", 12, "unterminated range"),
        ("{!local obama", 0, "unterminated local parameters"),
        ("obama ~", 6, "unexpected '~'"),
        ("obama^", 5, "number after '^'"),
        ("obama\\", 5, "dangling escape"),
    ],
)
def test_malformed_queries_report_the_position(query: str, position: int, fragment: str) -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse(query)
    assert error.value.position == position
    assert error.value.query == query
    assert fragment in str(error.value)
    assert isinstance(error.value, ValueError)


def test_syntax_error_survives_pickling() -> None:
    with pytest.raises(QuerySyntaxError) as error:
        parse("a )")
    copy = pickle.loads(pickle.dumps(error.value))
    assert (copy.position, copy.query, str(copy)) == (2, "a )", "unbalanced ')' at position 2")


def test_parsed_query_survives_pickling_and_accepts_bytes_and_none() -> None:
    query = pickle.loads(pickle.dumps(parse('"climate change" AND NOT hoax')))
    assert isinstance(query, TopicQuery)
    assert query.matches(b"Climate  change")
    assert not query.matches("climate change hoax")
    assert not query.matches(None)  # type: ignore[arg-type]
    assert not parse("climate AND NOT hoax").matches_story(title=None, text=None)


# ---- property: agrees with a naive boolean evaluation over word sets --------------------------------

WORDS = ["alpha", "beta", "gamma", "delta"]


def expressions() -> st.SearchStrategy[tuple[str, str]]:
    """Pairs of (query text, python expression over a set `s`), with explicit operators and parentheses."""
    leaves = st.sampled_from(WORDS).map(lambda w: (w, f"({w!r} in s)"))

    def extend(children: st.SearchStrategy[tuple[str, str]]) -> st.SearchStrategy[tuple[str, str]]:
        pairs = st.tuples(children, children)
        return st.one_of(
            pairs.map(lambda p: (f"({p[0][0]} AND {p[1][0]})", f"({p[0][1]} and {p[1][1]})")),
            pairs.map(lambda p: (f"({p[0][0]} OR {p[1][0]})", f"({p[0][1]} or {p[1][1]})")),
            pairs.map(lambda p: (f"({p[0][0]} AND NOT {p[1][0]})", f"({p[0][1]} and not {p[1][1]})")),
            children.map(lambda c: (f"(NOT {c[0]})", f"(not {c[1]})")),
        )

    return st.recursive(leaves, extend, max_leaves=8)


@settings(max_examples=80, deadline=None)
@given(
    expressions(), st.lists(st.sets(st.sampled_from(WORDS + ["alphabet", "betas"])), min_size=1, max_size=6)
)
def test_boolean_semantics_match_a_naive_evaluation(pair: tuple[str, str], documents: list[set[str]]) -> None:
    query_text, expression = pair
    if eval(expression, {}, {"s": set()}):  # noqa: S307 - matches a story with no words: only excludes
        with pytest.raises(QuerySyntaxError):
            parse(query_text)
        return
    query = parse(query_text)
    for words in documents:
        text = " ".join(sorted(words)).upper()
        expected = eval(expression, {}, {"s": words})  # noqa: S307 - expression built above from fixed words
        assert query.matches(text) == expected, (query_text, text)


@given(
    expressions(),
    st.lists(
        st.sets(
            st.sampled_from([*WORDS, "ＡＬＰＨＡ", "Straße", "strasse", "ÉTÉ", "ete", "İstanbul", "ﬁre"])
        ),
        min_size=1,
        max_size=6,
    ),
)
def test_may_match_accepts_every_text_matches_accepts(
    pair: tuple[str, str], documents: list[set[str]]
) -> None:
    # The spider's potential match on a raw page may be permissive, never stricter: a page it rejects is
    # never extracted, so a story that would have matched would be lost.
    try:
        query = parse(pair[0])
    except QuerySyntaxError:
        return  # a query that only excludes (refused, see above)
    for words in documents:
        text = " — ".join(sorted(words))
        if query.matches(text):
            assert query.may_match(text), (pair[0], text)


def test_may_match_folds_unicode_when_lower_casing_finds_nothing() -> None:
    assert parse("strasse").may_match("Die Straße ist gesperrt — sagte er.")
    assert parse("alpha").may_match("ＡＬＰＨＡ team report")
    assert not parse("climate").may_match("Le café est fermé — weather report")
    # the page as written is tried first: capital accented letters are left to the full folding
    assert parse("émile").may_match("Le CAFÉ d'ÉMILE — weather report")
    assert parse("cafe").may_match("Le CAFÉ d'ÉMILE — weather report")
    assert not parse("zola").may_match("Le CAFÉ d'ÉMILE — weather report")


def monotone_expressions() -> st.SearchStrategy[str]:
    """Queries without NOT (AND and OR of the test words): ``may_match`` relaxes nothing in them."""
    return st.recursive(
        st.sampled_from(WORDS),
        lambda children: st.tuples(children, children, st.sampled_from(["AND", "OR"])).map(
            lambda t: f"({t[0]} {t[2]} {t[1]})"
        ),
        max_leaves=6,
    )


@given(
    monotone_expressions(),
    st.lists(st.sampled_from([*WORDS, "ALPHA", "Beta", "GAMMA", "Straße", "ÉTÉ"]), min_size=1, max_size=8),
)
def test_may_match_without_not_ignores_ascii_capitals(query_text: str, words: list[str]) -> None:
    # Trying the page as written first must not accept anything lower-casing it would not: a page's verdict
    # is the same whatever the case of its ASCII letters.
    query = parse(query_text)
    page = " — ".join(words)
    lowered = "".join(char.lower() if char.isascii() else char for char in page)
    assert query.may_match(page) == query.may_match(lowered), (query_text, page)
