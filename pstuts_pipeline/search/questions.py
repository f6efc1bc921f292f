"""What counts as a question, checked once for `pstuts search`, `pstuts ask` and the JSON API alike.

Without a letter or digit to match, search would return the collection's first chunks as if they were answers;
text that is not valid Unicode (a lone surrogate) cannot be embedded or printed.
"""

from __future__ import annotations

import re

# A letter or a digit: `\w` alone would also take "___".
_WORD = re.compile(r"[^\W_]")
EXCERPT_CHARS = 40


class QuestionError(ValueError):
    """A question that cannot be asked; the message says why, quoting at most a short excerpt."""


def excerpt(text: str, limit: int = EXCERPT_CHARS) -> str:
    """A short, escaped quote of user input for an error message (lone surrogates and controls as escapes)."""
    short = text if len(text) <= limit else text[:limit] + "..."
    return ascii(short) if not short.isprintable() or _surrogate_at(short) is not None else repr(short)


def _surrogate_at(text: str) -> int | None:
    """Where the first lone surrogate is, if any."""
    return next((i for i, ch in enumerate(text) if "\ud800" <= ch <= "\udfff"), None)


def checked_question(text: str, from_command_line: bool = False) -> str:
    """The question stripped, or QuestionError naming what is wrong with it.

    On a command line, a question typed in another encoding arrives with its undecodable bytes as lone surrogates:
    the advice is then the terminal's locale.
    """
    at = _surrogate_at(text)
    if at is not None and from_command_line:
        raise QuestionError(
            f"the question is not UTF-8 text (byte {at} cannot be read): set a UTF-8 locale, "
            "or give the question in UTF-8"
        )
    if at is not None:
        raise QuestionError(f"the question is not valid Unicode text (character {at} cannot be read): give it as UTF-8")
    stripped = text.strip()
    if not _WORD.search(stripped):
        raise QuestionError(f"a question needs at least one word (a letter or digit); got {excerpt(stripped)}")
    return stripped
