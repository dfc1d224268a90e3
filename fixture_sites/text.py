"""Deterministic words, names and paragraphs derived from a seed (site process)."""

from __future__ import annotations

import hashlib
from functools import lru_cache

_STEMS = (
    "al",
    "bra",
    "cor",
    "del",
    "fen",
    "gra",
    "hol",
    "jun",
    "kel",
    "lum",
    "mar",
    "nor",
    "pel",
    "quin",
    "ros",
    "tal",
)
_ENDINGS = (
    "a",
    "ex",
    "ion",
    "ora",
    "ite",
    "us",
    "en",
    "ar",
    "is",
    "on",
    "ine",
    "ur",
    "ax",
    "ent",
    "ia",
    "o",
)
WORDS: tuple[str, ...] = tuple(stem + ending for stem in _STEMS for ending in _ENDINGS)
"""256 pronounceable pseudo-words, indexed by one byte."""

PARAGRAPH_POOL_SIZE = 64


def digest(seed: int, kind: str, ident: int, size: int = 32) -> bytes:
    """Return ``size`` pseudo-random bytes fixed by (seed, kind, ident)."""
    return hashlib.blake2b(f"{seed}:{kind}:{ident}".encode(), digest_size=size).digest()


def words(data: bytes) -> list[str]:
    """Map each byte of ``data`` to a word."""
    return [WORDS[byte] for byte in data]


def sentences(data: bytes, words_per_sentence: int = 9) -> str:
    """Turn bytes into capitalised sentences of ``words_per_sentence`` words."""
    chosen = words(data)
    parts: list[str] = []
    for start in range(0, len(chosen), words_per_sentence):
        group = chosen[start : start + words_per_sentence]
        parts.append(" ".join(group).capitalize() + ".")
    return " ".join(parts)


@lru_cache(maxsize=32)
def paragraph_pool(seed: int) -> tuple[str, ...]:
    """Return the seed's pool of short paragraphs used to fill large pages."""
    return tuple(sentences(digest(seed, "paragraph", index, 40)) for index in range(PARAGRAPH_POOL_SIZE))
