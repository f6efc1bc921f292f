"""One escaping for every field any command prints: data never drives the terminal, forges a line or a link.

Titles, urls, transcripts, answers and error messages come from files and servers nobody vetted. Shown raw,
ESC starts escape sequences (colours, OSC 8 hyperlinks, clear-screen), a newline inside a title forges a whole
result line, and bidirectional overrides make text read differently from what it is.
"""

from __future__ import annotations

import re
from urllib.parse import urlsplit

# C0 and C1 control characters (newline, tab and carriage return included: a field is one line), and the
# Unicode format characters that reorder or hide text: bidi embeddings, overrides and isolates, marks, and the
# line and paragraph separators.
UNSAFE = re.compile("[\x00-\x1f\x7f-\x9f\u061c\u200e\u200f\u2028\u2029\u202a-\u202e\u2066-\u2069]")
LINK_SCHEMES = ("http", "https")


def printable(text: str) -> str:
    """A field as one safe line: every unsafe character shown as its escape (`\\n`, `\\x1b`, `\\u202e`)."""
    return UNSAFE.sub(lambda m: m.group().encode("unicode_escape").decode("ascii"), str(text))


def safe_link(link: str) -> str:
    """A link worth printing as one: http(s) or a local media path; any other scheme is named, not linked.

    `javascript:` and `file:///etc/passwd` are what a hostile url field would use; a local media file is how
    caption videos without a url are linked (a plain path, no scheme).
    """
    text = str(link)
    scheme = urlsplit(text).scheme.lower() if ":" in text else ""
    if scheme in LINK_SCHEMES or (not scheme and text) or (len(scheme) == 1 and text[1:3] in (":\\", ":/")):
        return printable(text)
    return f"(link not shown: {printable(scheme or 'unknown')}: scheme)" if text else ""
