"""A leak's fingerprint: one short id that stays the same for the same leak across runs, line moves and machines (pure).

LeakCanary hashes a leak's suspect references into a signature; this does the same with what a leak verdict names:

- the **holder's path shape**: ``spider.groups[…]['items'] -> 10 lists[1,200]`` becomes
  ``spider.groups[]['items'] -> list`` (indices, sizes, counts and addresses removed; identifier keys kept);
- the **keeping code**: the statement at the line that stores into the holder, as tokens (comments, whitespace and
  line breaks dropped, number literals as ``#``), and the qualified name of the function it is in
  (``HoardingSpider.parse_product``).

Never a line number, a size or a file's place on disk: an edit above the line, another machine or another run keeps the
fingerprint; another holder or another storing statement changes it. Without a holder, the retention path's shape (what
keeps Scrapy objects alive after the crawl) and the top growth site's code stand in; with nothing named at all, the
verdict and the spider. :func:`leak_basis` returns those parts (report.json keeps them beside the id, so a reviewer sees
what was hashed); :func:`fingerprint_of` hashes them. Runs in any process; the source files are read by the caller
(``attribution/sourcecode.py`` in the crawl process, :func:`code_at` takes the reader).
"""

from __future__ import annotations

import ast
import hashlib
import itertools
import re
import tokenize
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import PurePath
from typing import TypeGuard

from pytest_crawlmem.core.models import GrowthSite, Holder, RetentionPath

#: Bumped when what is hashed changes, so an id never means two different things.
FINGERPRINT_VERSION = 1
#: Hex digits kept of the SHA-256 (64 bits).
FINGERPRINT_LENGTH = 16

_IDENTIFIER_KEY = re.compile(r"""\[(['"])[A-Za-z_][A-Za-z0-9_]*\1\]""")
_BRACKETS = re.compile(r"\[[^\[\]]*\]")
_ADDRESS = re.compile(r"\b0x[0-9a-fA-F]+\b")
_COUNTED = re.compile(r"(^|-> )\d[\d,]* ([A-Za-z_][\w.]*?)s\b")  # "-> 10 lists": the count of containers, plural
_FSTRING_START = getattr(tokenize, "FSTRING_START", -1)  # Python 3.12+
_FSTRING_END = getattr(tokenize, "FSTRING_END", -1)
_SKIPPED_TOKENS = frozenset({tokenize.COMMENT, tokenize.NL, tokenize.NEWLINE, tokenize.INDENT, tokenize.DEDENT,
                             tokenize.ENDMARKER})


@dataclass(frozen=True, slots=True)
class KeepingCode:
    """The code at a line: the qualified name of its function (``<module>`` at module level) and its statement's tokens."""

    function: str
    code: str


def holder_shape(path: str) -> str:
    """A holder or retention path without what changes from run to run: indices, sizes, counts, addresses.

    ``spider.groups[…]['items'] -> 10 lists[1,200]`` -> ``spider.groups[]['items'] -> list``;
    ``class m.Kept .trees -> list[1,000] [999] -> SelectorList[1] [0] -> Selector`` ->
    ``class m.Kept .trees -> list[] [] -> SelectorList[] [] -> Selector``.
    """
    text = _ADDRESS.sub("0x", path)
    keys: list[str] = []

    def keep(match: re.Match[str]) -> str:
        keys.append(match[0])
        return f"\x00{len(keys) - 1}\x00"

    text = _IDENTIFIER_KEY.sub(keep, text)
    text = _BRACKETS.sub("[]", text)
    text = _COUNTED.sub(r"\1\2", text)
    text = re.sub(r"\x00(\d+)\x00", lambda m: keys[int(m[1])], text)
    text = re.sub(r"(\w)\[\](?= ->|$)", r"\1", text)  # a container's size right after its type: "list[907]" -> "list"
    return " ".join(text.split())


def normalized_code(text: str) -> str:
    """Source text as its tokens joined by single spaces: comments, indentation and line breaks dropped, numbers ``#``."""
    out: list[str] = []
    lines = text.splitlines(keepends=True)
    readline = iter(lines).__next__
    fstring: list[tuple[int, int]] = []  # where each open f-string starts (3.12+ splits them into tokens)
    try:
        for token in tokenize.generate_tokens(readline):
            if token.type == _FSTRING_START:
                fstring.append(token.start)
            elif token.type == _FSTRING_END and fstring:
                start = fstring.pop()
                if not fstring:  # the whole f-string as its source text: one token, as 3.10 and 3.11 read it
                    out.append(_between(lines, start, token.end))
            elif fstring:
                continue
            elif token.type == tokenize.NEWLINE:
                out.append(" ")  # between a decorator and its def
            elif token.type not in _SKIPPED_TOKENS:
                out.append("#" if token.type == tokenize.NUMBER else token.string)
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return " ".join(re.sub(r"#.*$", "", line).strip() for line in text.splitlines()).strip()
    return _joined(out)


def _between(lines: Sequence[str], start: tuple[int, int], end: tuple[int, int]) -> str:
    """The source text from ``start`` to ``end`` (tokenize's (row, column) positions, rows from 1)."""
    if start[0] == end[0]:
        return lines[start[0] - 1][start[1]:end[1]]
    return lines[start[0] - 1][start[1]:] + "".join(lines[start[0]:end[0] - 1]) + lines[end[0] - 1][:end[1]]


def _joined(tokens: Sequence[str]) -> str:
    """Tokens as one line: a space between two words and after a comma, none elsewhere (``f(a, b).x=y*#``)."""
    text = ""
    for token in tokens:
        if token == " ":
            text = text.rstrip() + " " if text else text
            continue
        if text and not text.endswith(" ") and (text.endswith(",") or (_wordy(text[-1]) and _wordy(token[0]))):
            text += " "
        text += token
    return text.strip()


def _wordy(char: str) -> bool:
    return char.isalnum() or char in "_'\"#"


def keeping_code(source: str, line: int) -> KeepingCode | None:
    """The statement at ``line`` of a module's ``source`` (a compound statement's header only) and its function's
    qualified name; ``None`` when the source does not parse or has no statement there."""
    try:
        tree = ast.parse(source)
    except (SyntaxError, ValueError):
        return None
    found = _innermost(tree, line, ())
    if found is None:
        return None
    statement, scopes = found
    body = getattr(statement, "body", None)
    if isinstance(body, list) and body and isinstance(body[0], ast.stmt) and _first_line(body[0]) > line:
        # the header (a def's with its decorators, an if's): not what the body holds
        text = "\n".join(source.splitlines()[_first_line(statement) - 1:_first_line(body[0]) - 1])
        if isinstance(statement, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)):  # an lru_cache's ``def``
            scopes = (*scopes, (statement.name, isinstance(statement, ast.ClassDef)))
    else:
        text = ast.get_source_segment(source, statement) or ""
    return KeepingCode(function=qualified_name(scopes), code=normalized_code(text))


Scope = tuple[tuple[str, bool], ...]  # the classes and functions around a statement: (name, is a class), outermost first


def qualified_name(scopes: Scope) -> str:
    """``__qualname__``'s spelling of a statement's scopes: ``A.f``, ``f.<locals>.g``; ``<module>`` at module level."""
    if not scopes:
        return "<module>"
    text = scopes[0][0]
    for (_, outer_is_class), (name, _) in itertools.pairwise(scopes):
        text += f".{name}" if outer_is_class else f".<locals>.{name}"
    return text


def _first_line(node: ast.stmt) -> int:
    """A statement's first line: its first decorator's, for a decorated def or class."""
    decorators: list[ast.expr] = getattr(node, "decorator_list", [])
    return min([node.lineno, *(d.lineno for d in decorators)])


def _opens_scope_at(node: ast.stmt, line: int) -> TypeGuard[ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef]:
    """Whether ``node`` is a def or class whose body holds ``line`` (its header is not inside it)."""
    return (isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef, ast.ClassDef)) and bool(node.body)
            and line >= _first_line(node.body[0]))


def _innermost(node: ast.AST, line: int, scopes: Scope) -> tuple[ast.stmt, Scope] | None:
    """The innermost statement spanning ``line`` below ``node``, with the classes and functions around it."""
    best: tuple[ast.stmt, Scope] | None = None
    for child in ast.iter_child_nodes(node):
        if not isinstance(child, ast.stmt):
            continue
        if not _first_line(child) <= line <= (child.end_lineno or child.lineno):
            continue
        inner = scopes
        if _opens_scope_at(child, line):
            inner = (*scopes, (child.name, isinstance(child, ast.ClassDef)))
        best = (child, scopes)
        deeper = _innermost(child, line, inner)
        if deeper is not None:
            best = deeper
    return best


def code_at(location: str, source_of: Callable[[str], str | None]) -> KeepingCode | None:
    """:func:`keeping_code` of ``file:line``, the file's text read by ``source_of`` (the crawl's and the report's layers
    read files; the core does not); ``None`` when it cannot be read or parsed."""
    file, _, number = location.rpartition(":")
    if not file or not number.isdigit():
        return None
    source = source_of(file)
    return None if source is None else keeping_code(source, int(number))


CodeReader = Callable[[str], "KeepingCode | None"]


def _code_parts(location: str, read: CodeReader | None) -> list[str]:
    code = read(location) if read is not None else None
    if code is None:
        file = location.rpartition(":")[0] or location
        return [f"file {PurePath(file).name}"]  # the source is unreadable: the file's name, never its line
    return [f"function {code.function}", f"code {code.code}"]


def leak_basis(
    verdict: str, spider: str, *, holders: Sequence[Holder] = (), retention: Sequence[RetentionPath] = (),
    sites: Sequence[GrowthSite] = (), read: CodeReader | None = None,
) -> tuple[str, ...]:
    """What a leak's fingerprint hashes, most telling first: the holder's shape and its keeping code; else the shape of
    what keeps Scrapy objects alive after the crawl and the top growth site's code; else the verdict and spider.

    ``read`` gives the code at a ``file:line`` (``None``, or a line it cannot read: the file's name stands in)."""
    holder = next((h for h in holders if h.line), holders[0] if holders else None)  # the holder the verdict names
    if holder is not None:
        return (f"holder {holder_shape(holder.path)}", *(_code_parts(holder.line, read) if holder.line else ()))
    user_site = next((s for s in sites if s.in_user_code), None)
    retained = next((r for r in retention if r.path), None)
    if retained is not None and retained.path is not None:
        site_parts = _code_parts(user_site.location, read) if user_site is not None else []
        return (f"retained {retained.class_name} via {holder_shape(retained.path)}", *site_parts)
    if user_site is not None:
        return tuple(_code_parts(user_site.location, read))
    return (f"verdict {verdict}", f"spider {spider}")


def fingerprint_of(basis: Sequence[str]) -> str:
    """The fingerprint of a leak's basis: 16 hex digits of a SHA-256 over the parts and the format's version."""
    text = "\n".join((f"crawlmem-leak {FINGERPRINT_VERSION}", *basis))
    return hashlib.sha256(text.encode("utf-8")).hexdigest()[:FINGERPRINT_LENGTH]
