"""User text that reaches a file, a terminal or a message: validated once where it enters,
quoted for its format where it leaves.

Entering: `check_text` (and `SafeText` for pydantic models) refuses control and format
characters (newlines, escapes, NUL, bidi overrides, the Unicode line separators) and bounds the
length, naming the field. Leaving: the serializers quote YAML and JSON, `shlex.quote` quotes
shell words, and the helpers here escape Markdown (`markdown`), keep a comment on one line
(`one_line`, a second guard behind the validation) and cut strings shown in errors (`shown`,
in advisor/core/units.py).
"""

from __future__ import annotations

import re
import unicodedata
from typing import Annotated

from pydantic import AfterValidator

from advisor.core.errors import InvalidInput
from advisor.core.units import shown

MAX_NAME_CHARS = 128
"""Names (a model's, a profile's GPU and software strings): `meta-llama/Llama-3.1-8B` is 23."""
MAX_PATH_CHARS = 1024


def bad_character(text: str) -> str | None:
    """The first character that must not reach a file or a terminal, described; None if none.
    Refused: Unicode categories Cc (control: newline, tab, escape, NUL), Cf (format: bidi
    overrides, zero-width), Cs / Co / Cn (surrogates, private use, unassigned), Zl and Zp."""
    for i, ch in enumerate(text):
        category = unicodedata.category(ch)
        if category[0] == "C" or category in ("Zl", "Zp"):
            return f"character U+{ord(ch):04X} ({category}) at position {i}"
    return None


def check_text(text: str, field: str, max_chars: int = MAX_NAME_CHARS) -> str:
    """`text` if it is printable and at most `max_chars` long; else InvalidInput naming `field`."""
    if not isinstance(text, str):
        raise InvalidInput(field, f"must be a string, got {type(text).__name__}", "text")
    allowed = f"printable text of 1 to {max_chars} characters, no control characters"
    if not text or len(text) > max_chars:
        raise InvalidInput(field, f"{shown(text)} has {len(text)} characters", allowed)
    bad = bad_character(text)
    if bad:
        raise InvalidInput(field, f"{shown(text)} contains a {bad}", allowed)
    return text


def _text_validator(max_chars: int):
    def check(value: str) -> str:
        if len(value) > max_chars:
            raise ValueError(f"longer than {max_chars} characters")
        bad = bad_character(value)
        if bad:
            raise ValueError(f"contains a {bad}; control characters are not allowed")
        return value

    return check


SafeText = Annotated[str, AfterValidator(_text_validator(MAX_NAME_CHARS))]
"""A pydantic string field that may reach a file: printable, at most MAX_NAME_CHARS."""
SafeLongText = Annotated[str, AfterValidator(_text_validator(4096))]
"""The same for free text (a command line, a note), at most 4096 characters."""

# Characters with a meaning inside a Markdown line (CommonMark lets any ASCII punctuation be
# backslash-escaped): emphasis, code spans, link and image brackets (their `(` `!` then mean
# nothing), raw HTML, table cells, a heading's closing #s, strikethrough, entities, math.
_MARKDOWN_SPECIAL = re.compile(r"([\\`*_\[\]<>#|~&$])")


def markdown(text: str) -> str:
    """`text` as literal Markdown inline text: its special characters backslash-escaped and any
    line break turned into a space (it stays inside its line, table cell or heading)."""
    return _MARKDOWN_SPECIAL.sub(r"\\\1", one_line(text))


def one_line(text: str) -> str:
    """`text` with every control, format or line-separator character replaced by a space: safe
    after `#` in a shell or YAML comment. Validation refuses such characters where user text
    enters; this keeps a comment on its line even if something slipped through."""
    return "".join(" " if bad_character(ch) else ch for ch in str(text))


def absolute_path(text: str, field: str) -> str:
    """A directory written into a config (the NVMe swap folder): absolute, printable, and made
    of characters that need no quoting in JSON, YAML, shell or Markdown code."""
    check_text(text, field, MAX_PATH_CHARS)
    allowed = "an absolute path of letters, digits and ._+@:=,~/- (e.g. /local_nvme/ds)"
    if not text.startswith("/"):
        raise InvalidInput(field, f"{shown(text)} is not an absolute path", allowed)
    if not re.fullmatch(r"/[A-Za-z0-9._+@:=,~/-]*", text):
        raise InvalidInput(field, f"{shown(text)} has characters outside the allowed set", allowed)
    return text
