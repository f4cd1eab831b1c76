"""Word tokens and their stable 64-bit hashes, the ground of every dedup measure: simhash fingerprints, shingles
and containment keys all read a text as ``tokenize`` splits it and hash its tokens with ``token_hash``.

A change here changes every stored fingerprint: bump ``topicmap.dedup.simhash.FEATURE_VERSION`` with it.
"""

from __future__ import annotations

import hashlib
import re

import numpy as np

# \w is Unicode-aware for str patterns: letters and digits of every script, plus "_".
TOKEN_RE = re.compile(r"\w+")
_HASH_PERSON = b"topicmap-simhash"
TOKEN_HASH_CACHE: dict[str, int] = {}
_TOKEN_HASH_CACHE_MAX = 2_000_000

_U64 = np.uint64


def token_hash(token: str) -> int:
    """Stable 64-bit hash of a token (blake2b), memoized: news vocabulary repeats heavily."""
    value = TOKEN_HASH_CACHE.get(token)
    if value is None:
        if len(TOKEN_HASH_CACHE) >= _TOKEN_HASH_CACHE_MAX:
            TOKEN_HASH_CACHE.clear()
        digest = hashlib.blake2b(token.encode("utf-8"), digest_size=8, person=_HASH_PERSON).digest()
        value = int.from_bytes(digest, "little")
        TOKEN_HASH_CACHE[token] = value
    return value


def mix_pair(first: np.ndarray, second: np.ndarray) -> np.ndarray:
    """Order-sensitive 64-bit hash of two token hashes (splitmix64 finalizer), vectorized."""
    with np.errstate(over="ignore"):
        x = first * _U64(0x9E3779B97F4A7C15) + (second ^ _U64(0xD6E8FEB86659FD93))
        x ^= x >> _U64(30)
        x *= _U64(0xBF58476D1CE4E5B9)
        x ^= x >> _U64(27)
        x *= _U64(0x94D049BB133111EB)
        x ^= x >> _U64(31)
    return x


def tokenize(text: str) -> list[str]:
    """Casefolded Unicode word tokens, as used for fingerprints and shingle sets."""
    if not isinstance(text, str):
        raise TypeError(f"text must be str, got {type(text).__name__}")
    return TOKEN_RE.findall(text.casefold())


def token_hashes(tokens: list[str]) -> np.ndarray:
    """``token_hash`` of each token as uint64: a C-level loop over the memo, a Python call per token only
    when some token is not memoized yet."""
    try:
        return np.fromiter(map(TOKEN_HASH_CACHE.__getitem__, tokens), dtype=np.uint64, count=len(tokens))
    except KeyError:
        return np.fromiter(map(token_hash, tokens), dtype=np.uint64, count=len(tokens))
