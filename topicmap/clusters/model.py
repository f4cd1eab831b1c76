"""Story vectors, k chosen from the SSE curve, one-shot KMeans, and words and titles that name a cluster.

The method of the "story duplication and mutation" chapter (GDELT news on Spark, its second half), done with
scikit-learn:

1. hashed term frequencies (``HashingVectorizer``), weighted by inverse document frequency;
2. *random indexing*: every hashed term gets a sparse random signature of +1/-1 over ``dims`` dimensions and a
   document is the TF-IDF-weighted sum of its terms' signatures (a sparse matrix product; Johnson-Lindenstrauss
   keeps distances). The chapter hashes straight into 256 buckets and suffers the collisions it describes; we
   hash into 2**18 buckets first and only then project to 256, which is what random indexing is for;
3. KMeans on the L2-normalised vectors. The chapter settles for Euclidean KMeans on raw vectors and notes that
   cosine suits text better; on unit vectors Euclidean distance is a monotone function of cosine, so we get
   cosine clustering from plain (and Spark's) Euclidean KMeans;
4. k from the SSE (inertia) curve: the chapter looks for the elbow by eye and falls back on the rule of thumb
   k = sqrt(n / 2); we find the elbow with kneedle (the ``kneed`` package) and fall back on the same rule when
   the curve has no knee, both bounded by configuration.

Words label clusters only: projected features cannot be mapped back to words, so the top terms come from a
TF-IDF over the members' hashed counts, each bucket named by the word of the batch that falls in it (the words
are read once, for the counts and the labels), without the stop words of the stories' languages and without
newswire boilerplate ("said", "told", "reuters"), which otherwise names every cluster.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from functools import lru_cache

import numpy as np
from scipy import sparse
from sklearn.cluster import KMeans
from sklearn.feature_extraction.text import ENGLISH_STOP_WORDS, HashingVectorizer
from sklearn.preprocessing import normalize
from sklearn.utils import murmurhash3_32

#: hashed vocabulary size before random indexing: distinct words rarely collide
HASH_FEATURES = 2**18
#: non-zero entries per word signature in random indexing (the usual handful of +1/-1)
SIGNATURE_NONZEROS = 8
#: the chapter's vector size
DIMS = 256
#: stories weighted and projected at a time
EMBED_CHUNK = 8192
TOP_TERMS = 5
TITLES_PER_CLUSTER = 3
#: top terms are read from at most this many members of each cluster
LABEL_SAMPLE = 400
#: the SSE curve is computed on at most this many stories (a uniform sample): the elbow's place does not need
#: all of 100,000 stories, and KMeans for every k on all of them would cost more than the clustering itself
CURVE_SAMPLE = 2000
#: at most this many k values are tried between the bounds (spread evenly; kneedle needs the shape, not each k)
CURVE_POINTS = 12
#: words every wire story uses whatever it is about; they name no story (seen as labels of real topics)
NEWSWIRE_BOILERPLATE = frozenset(
    [
        "said",
        "says",
        "say",
        "saying",
        "told",
        "tells",
        "according",
        "reported",
        "reports",
        "report",
        "reporting",
        "reuters",
        "afp",
        "ap",
        "upi",
        "press",
        "agency",
        "news",
        "newsroom",
        "percent",
        "per",
        "cent",
        "year",
        "years",
        "week",
        "weeks",
        "month",
        "months",
        "day",
        "days",
        "today",
        "yesterday",
        "tomorrow",
        "monday",
        "tuesday",
        "wednesday",
        "thursday",
        "friday",
        "saturday",
        "sunday",
        "mr",
        "mrs",
        "ms",
        "dr",
        "also",
        "would",
        "could",
        "one",
        "two",
        "three",
        "first",
        "last",
        "new",
        "just",
        "like",
        "including",
        "added",
        "statement",
        "spokesman",
        "spokeswoman",
        "spokesperson",
        "official",
        "officials",
        "people",
        "time",
        "times",
        "told",
        "asked",
        "editor",
        "editors",
        "copyright",
        "rights",
        "reserved",
        "read",
        "more",
        "subscribe",
        "click",
        "photo",
        "image",
        "video",
        "via",
        "http",
        "https",
        "www",
        "com",
        "html",
    ]
)


def check_texts(texts: Sequence[str], what: str = "texts", offset: int = 0) -> list[str]:
    """``texts`` as a list, or a TypeError naming the first that is no string (numbered from ``offset``: a
    batch's texts are numbered as in the whole sequence)."""
    if isinstance(texts, str):
        raise TypeError(f"{what} must be a sequence of strings, not one string")
    texts = list(texts)
    for i, text in enumerate(texts):
        if not isinstance(text, str):
            raise TypeError(f"{what}[{offset + i}] must be a string, got {type(text).__name__}")
    return texts


# --------------------------------------------------------------------------------------------- vectors


#: scikit-learn's default token, two word characters or more, read from the lowercased text
_WORD = re.compile(r"(?u)\b\w\w+\b")


def tokenize(texts: Sequence[str]) -> list[list[str]]:
    """Each text's words as scikit-learn's vectorizers read them by default (lowercased, two word characters or
    more). Read once and used twice, for the hashed counts and for the label words: reading the stories twice
    cost more than the rest of a weekly step."""
    return [_WORD.findall(text.lower()) for text in check_texts(texts)]


def hashed_bucket(word: str) -> int:
    """The column of ``term_counts`` that counts ``word``: scikit-learn's FeatureHasher index, abs(murmurhash3 of
    the UTF-8 word, seed 0) modulo HASH_FEATURES (its special case for -2**31 gives the same 0 for a power of
    two)."""
    return abs(murmurhash3_32(word, seed=0)) % HASH_FEATURES


def _as_tokenized(tokens: list[str]) -> list[str]:
    return tokens


def _hasher() -> HashingVectorizer:
    # raw counts (float32 holds them exactly, in half the memory): IDF and normalisation come after, so a stream
    # can weigh terms by what it has seen so far
    return HashingVectorizer(
        analyzer=_as_tokenized,
        lowercase=False,
        n_features=HASH_FEATURES,
        alternate_sign=False,
        norm=None,
        dtype=np.float32,
    )


@lru_cache(maxsize=4)
def _projection(dims: int, seed: int) -> sparse.csr_matrix:
    """The random-indexing signatures (HASH_FEATURES x dims): each hashed term gets SIGNATURE_NONZEROS distinct
    dimensions with random signs, fixed by (dims, seed) and shared by every batch so spaces stay comparable."""
    if dims < SIGNATURE_NONZEROS:
        raise ValueError(f"dims must be at least {SIGNATURE_NONZEROS}, got {dims}")
    rng = np.random.default_rng(seed)
    # distinct dimensions per term: a random start and steps of at least one whose total stays below dims
    steps = rng.integers(1, dims // SIGNATURE_NONZEROS + 1, size=(HASH_FEATURES, SIGNATURE_NONZEROS))
    steps[:, 0] = rng.integers(0, dims, size=HASH_FEATURES)
    columns = np.cumsum(steps, axis=1) % dims
    signs = rng.choice(np.array([-1.0, 1.0]), size=(HASH_FEATURES, SIGNATURE_NONZEROS))
    rows = np.repeat(np.arange(HASH_FEATURES), SIGNATURE_NONZEROS)
    return sparse.csr_matrix(
        (signs.ravel() / np.sqrt(SIGNATURE_NONZEROS), (rows, columns.ravel())), shape=(HASH_FEATURES, dims)
    )


def term_counts(tokens: Sequence[list[str]]) -> sparse.csr_matrix:
    """Hashed term counts (stories x HASH_FEATURES) of tokenized texts (``tokenize``)."""
    return _hasher().transform(tokens) if len(tokens) else sparse.csr_matrix((0, HASH_FEATURES))


def document_frequency(counts: sparse.csr_matrix) -> np.ndarray:
    """How many stories contain each hashed term (int64)."""
    return np.bincount(counts.indices, minlength=HASH_FEATURES).astype(np.int64)


def smoothed_idf(frequency: np.ndarray, documents: int) -> np.ndarray:
    """scikit-learn's smoothed IDF, ln((1 + n) / (1 + df)) + 1 (the chapter's ln((n + 1) / (df + 1)), plus one
    so a term in every story still counts a little)."""
    return np.log((1.0 + documents) / (1.0 + frequency)) + 1.0


def embed(counts: sparse.csr_matrix, idf: np.ndarray, dims: int = DIMS, seed: int = 0) -> np.ndarray:
    """TF-IDF, L2-normalised, projected by random indexing and normalised again: unit vectors (stories x dims).
    A story with no word at all stays the zero vector. Done EMBED_CHUNK stories at a time, so the weighted copy
    of the counts never exists whole (100,000 stories of 500 words stay under 2 GB)."""
    vectors = np.zeros((counts.shape[0], dims))
    projection = _projection(dims, seed)
    for start in range(0, counts.shape[0], EMBED_CHUNK):
        rows = counts[start : start + EMBED_CHUNK]
        tfidf = normalize(rows.multiply(idf[None, :]).tocsr(), copy=False)
        vectors[start : start + rows.shape[0]] = (tfidf @ projection).toarray()
    return normalize(vectors, copy=False) if len(vectors) else vectors


def story_vectors(tokens: Sequence[list[str]], dims: int = DIMS, seed: int = 0) -> np.ndarray:
    """Unit vectors of tokenized texts (``tokenize``), IDF over these texts."""
    counts = term_counts(tokens)
    return embed(counts, smoothed_idf(document_frequency(counts), counts.shape[0]), dims, seed)


# --------------------------------------------------------------------------------------------- k


@dataclass
class KChoice:
    """The k chosen, how and why, and the SSE curve it was read from."""

    k: int
    method: str  # "kneedle" | "rule" | "only"
    reason: str
    ks: list[int] = field(default_factory=list)
    sse: list[float] = field(default_factory=list)
    curve_stories: int = 0

    def as_dict(self) -> dict:
        return {
            "k": self.k,
            "method": self.method,
            "reason": self.reason,
            "ks": self.ks,
            "sse": self.sse,
            "curve_stories": self.curve_stories,
        }


def rule_of_thumb_k(stories: int) -> int:
    """The chapter's rule: k = sqrt(n / 2) (15,000 articles give about 100 clusters)."""
    return max(1, round(math.sqrt(stories / 2)))


def curve_ks(k_min: int, k_max: int) -> list[int]:
    if k_max - k_min + 1 <= CURVE_POINTS:
        return list(range(k_min, k_max + 1))
    return sorted({round(v) for v in np.linspace(k_min, k_max, CURVE_POINTS)})


def sse_curve(vectors: np.ndarray, ks: Sequence[int], seed: int = 0) -> list[float]:
    """KMeans inertia (sum of squared distances to the nearest centre) for each k."""
    from threadpoolctl import threadpool_limits  # a scikit-learn dependency

    # one k-means++ start and a loose tolerance: the curve's shape, not each point's last digit, finds the elbow.
    # One thread: on a sample this small, OpenMP's hand-offs cost more than they save (6x on a busy machine)
    with threadpool_limits(1):
        return [
            float(
                KMeans(n_clusters=k, n_init=1, random_state=seed, max_iter=50, tol=1e-3).fit(vectors).inertia_
            )
            for k in ks
        ]


def choose_k(vectors: np.ndarray, k_min: int = 2, k_max: int = 30, seed: int = 0) -> KChoice:
    """k at the elbow of the SSE curve over [k_min, k_max] (kneedle), else the chapter's sqrt(n / 2), bounded.

    The bounds are clipped to what the stories allow (k below the number of distinct vectors)."""
    if not (isinstance(k_min, int) and isinstance(k_max, int) and 1 <= k_min <= k_max):
        raise ValueError(f"k bounds must be integers with 1 <= k_min <= k_max, got {k_min!r}, {k_max!r}")
    n = len(vectors)
    if n == 0:
        raise ValueError("no stories to cluster")
    rng = np.random.default_rng(seed)
    sample = vectors[np.sort(rng.choice(n, CURVE_SAMPLE, replace=False))] if n > CURVE_SAMPLE else vectors
    # stored vectors may be float32; the curve is read in float64
    sample = np.asarray(sample, dtype=np.float64)
    distinct = len(np.unique(sample.round(10), axis=0))
    # at most one cluster per two stories (a cluster of one story is no story), and fewer than distinct vectors
    upper = min(k_max, max(1, n // 2), distinct - 1 if distinct > 2 else distinct)
    lower = min(k_min, upper)
    if upper <= lower:
        return KChoice(
            lower, "only", f"only k={lower} is possible with {n} stories ({distinct} distinct)", [], [], n
        )
    # the curve starts at k=1 whatever the lower bound: the elbow at k_min is only visible from k_min - 1
    ks = sorted({1, *curve_ks(lower, upper)})
    sse = sse_curve(sample, ks, seed)
    from kneed import KneeLocator  # imported here: only the k choice needs it

    knee = KneeLocator(ks, sse, curve="convex", direction="decreasing", S=1.0).knee if len(ks) >= 3 else None
    if knee is not None:
        k = min(max(int(knee), lower), upper)
        bounded = "" if k == int(knee) else f", bounded to {k} by k_min={lower}, k_max={upper}"
        reason = (
            f"kneedle: the SSE curve over k=1..{upper} ({len(sample)} stories) bends most at k={int(knee)}"
            f"{bounded}; more clusters past the elbow buy little"
        )
        return KChoice(k, "kneedle", reason, ks, sse, len(sample))
    k = min(max(rule_of_thumb_k(n), lower), upper)
    reason = (
        f"the SSE curve over k=1..{upper} has no knee; the chapter's rule sqrt(n/2) for n={n} "
        f"gives {rule_of_thumb_k(n)}, bounded to k={k}"
    )
    return KChoice(k, "rule", reason, ks, sse, len(sample))


# --------------------------------------------------------------------------------------------- clustering


@dataclass
class ClusterResult:
    """One clustering: a label per text, the k choice, sizes, labels in words and the centroids."""

    labels: np.ndarray
    choice: KChoice
    sizes: dict[int, int]
    top_terms: dict[int, list[str]]
    titles: dict[int, list[str]]
    centroids: np.ndarray = field(repr=False)
    vectors: np.ndarray = field(repr=False)


def sizes_of(labels: np.ndarray, k: int) -> dict[int, int]:
    counts = np.bincount(labels[labels >= 0], minlength=k) if len(labels) else np.zeros(k, dtype=int)
    return {c: int(counts[c]) for c in range(k)}


def kmeans_fit(vectors: np.ndarray, k: int, seed: int = 0, *, copy: bool = True) -> KMeans:
    """KMeans, three k-means++ starts. ``copy=False`` lets scikit-learn centre ``vectors`` in place (and shift
    them back after) instead of copying them: for a caller whose array is its own temporary."""
    return KMeans(n_clusters=k, n_init=3, random_state=seed, copy_x=copy).fit(vectors)


# --------------------------------------------------------------------------------------------- words


@lru_cache(maxsize=64)
def _stop_words_for(languages: tuple[str, ...]) -> frozenset[str]:
    from stop_words import AVAILABLE_LANGUAGES, LANGUAGE_MAPPING, get_stop_words

    words: set[str] = set(ENGLISH_STOP_WORDS) | NEWSWIRE_BOILERPLATE
    for code in languages:
        name = LANGUAGE_MAPPING.get(code, code)
        if name in AVAILABLE_LANGUAGES:
            words.update(w.lower() for w in get_stop_words(name))
    # "aujourd'hui" or "ain't" reach the vectorizer as their tokens: stop those too
    words.update(part for word in list(words) for part in _WORD.findall(word))
    return frozenset(words)


def stop_words(languages: Sequence[str | None] | None) -> frozenset[str]:
    """English stop words, newswire boilerplate, and the stop words of each language the stories are in."""
    # a story whose language is unknown reads back from the store as None, or NaN through pandas: no stop words
    codes = sorted(
        {lang.split("-")[0].lower() for lang in (languages or []) if isinstance(lang, str) and lang}
    )
    return _stop_words_for(tuple(codes))


def label_sample(labels: np.ndarray, clusters: Sequence[int]) -> np.ndarray | None:
    """The stories whose words name the clusters (sorted positions), or None for all of them: at most
    LABEL_SAMPLE members of each cluster, a seeded sample, once there are more stories than that in all."""
    labels = np.asarray(labels)
    if len(labels) <= LABEL_SAMPLE * max(len(clusters), 1):
        return None
    # words of a cluster show in a few hundred of its stories; a seeded sample keeps labelling 100,000 stories at
    # a fraction of a second
    rng = np.random.default_rng(0)
    keep = np.concatenate(
        [
            rng.choice(members, min(len(members), LABEL_SAMPLE), replace=False)
            for members in (np.flatnonzero(labels == c) for c in clusters)
            if len(members)
        ]
        or [np.zeros(0, dtype=np.int64)]
    )
    keep.sort()
    return keep


def top_terms(
    counts: sparse.csr_matrix,
    tokens: Sequence[list[str]],
    labels: np.ndarray,
    clusters: Sequence[int] | range,
    languages: Sequence[str | None] | None = None,
    n_terms: int = TOP_TERMS,
) -> dict[int, list[str]]:
    """Words with the highest mean TF-IDF among each cluster's members (labels only, see module doc), given the
    members' hashed counts (``term_counts``) and their tokens (``tokenize``).

    scikit-learn's TF-IDF as ``TfidfVectorizer(sublinear_tf=True)`` computes it over the label words (letters
    only, no stop word), but read from the hashed counts, whose buckets the batch's label words are mapped back
    to: no second pass over the stories' words (a bucket two label words share, rare in 2**18, is named by the
    first of them alphabetically)."""
    result: dict[int, list[str]] = {int(c): [] for c in clusters}
    if not len(tokens):
        return result
    labels = np.asarray(labels)
    keep = label_sample(labels, list(result))
    if keep is not None:
        counts, tokens, labels = counts[keep], [tokens[i] for i in keep], labels[keep]
        languages = [languages[i] for i in keep] if languages is not None else None
    stop = stop_words(languages)
    words = sorted(w for w in set().union(*tokens) if w.isalpha() and w not in stop)
    if not words:
        return result
    named: dict[int, str] = {}  # bucket -> its word, in alphabetical order of the words
    for word in words:
        named.setdefault(hashed_bucket(word), word)
    buckets, names = np.fromiter(named, dtype=np.int64, count=len(named)), list(named.values())
    tf = counts[:, buckets].astype(np.float64).tocsr()
    tf.data = 1.0 + np.log(tf.data)  # sublinear TF
    # no max_df: the words of a cluster holding most of the stories are in most stories, and still name it
    idf = smoothed_idf(np.bincount(tf.indices, minlength=len(buckets)), tf.shape[0])
    tfidf = normalize(tf.multiply(idf[None, :]).tocsr(), copy=False)
    wanted = list(result)
    row_of = {cluster: row for row, cluster in enumerate(wanted)}
    members = np.array([row_of.get(int(label), -1) for label in labels])
    kept = np.flatnonzero(members >= 0)
    sizes = np.bincount(members[kept], minlength=len(wanted))
    # every cluster's summed TF-IDF in one sparse product (cluster x story membership times story x word)
    membership = sparse.csr_matrix(
        (np.ones(len(kept)), (members[kept], kept)), shape=(len(wanted), len(labels))
    )
    sums = (membership @ tfidf).toarray()
    for row, cluster in enumerate(wanted):
        if not sizes[row]:
            continue
        means = sums[row] / sizes[row]
        # ties broken by the word itself (the columns are in alphabetical order), so the labels never vary
        order = np.argsort(-means, kind="stable")[:n_terms]
        result[cluster] = [str(names[j]) for j in order if means[j] > 0]
    return result


def nearest_titles(
    vectors: np.ndarray,
    labels: np.ndarray,
    centers: np.ndarray,
    titles: Sequence[str],
    clusters: Sequence[int] | range,
    n_titles: int = TITLES_PER_CLUSTER,
) -> dict[int, list[str]]:
    """The chapter's representative titles: the members nearest the cluster's centre (distinct titles)."""
    labels = np.asarray(labels)
    distances = np.zeros(len(labels))
    for cluster in clusters:
        members = np.flatnonzero(labels == cluster)
        distances[members] = ((vectors[members] - centers[cluster]) ** 2).sum(axis=1)
    return titles_nearest(distances, labels, titles, clusters, n_titles)


def titles_nearest(
    distances: np.ndarray,
    labels: np.ndarray,
    titles: Sequence[str],
    clusters: Sequence[int] | range,
    n_titles: int = TITLES_PER_CLUSTER,
) -> dict[int, list[str]]:
    """Each cluster's first ``n_titles`` distinct titles (spaces squeezed, 140 characters at most) in the order
    of its members' ``distances`` to its centre."""
    result: dict[int, list[str]] = {}
    titles = titles if isinstance(titles, list) else list(titles)
    for cluster in clusters:
        members = np.flatnonzero(labels == cluster)
        chosen: list[str] = []
        for index in members[np.argsort(distances[members], kind="stable")]:
            title = " ".join(str(titles[index]).split())[:140]
            if title and title not in chosen:
                chosen.append(title)
            if len(chosen) == n_titles:
                break
        result[int(cluster)] = chosen
    return result


def cluster_label(terms: Sequence[str], titles: Sequence[str], max_chars: int = 48) -> str:
    """A short name for a cluster: its top terms, else its most central title."""
    if terms:
        return ", ".join(terms[:3])[:max_chars]
    if titles:
        title = titles[0]
        return title if len(title) <= max_chars else title[: max_chars - 1].rstrip() + "…"
    return ""
