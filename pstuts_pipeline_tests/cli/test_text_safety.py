"""Issue 21, class 6: one escaping for every printed field; links only for http(s) and local media."""

import pytest

from pstuts_pipeline.cli.text_safety import printable, safe_link


@pytest.mark.parametrize(
    ("raw", "shown"),
    [
        ("title\x1b[2J", "title\\x1b[2J"),
        ("a\nb\r\tc", "a\\nb\\r\\tc"),
        ("\x1b]8;;http://evil/\x07click\x1b]8;;\x07", "\\x1b]8;;http://evil/\\x07click\\x1b]8;;\\x07"),
        ("abc\u202eexe.txt", "abc\\u202eexe.txt"),
        ("x\u2066y\u2069\u200f\x85", "x\\u2066y\\u2069\\u200f\\x85"),
        ("Ünïcödé 日本 ok", "Ünïcödé 日本 ok"),
    ],
)
def test_unsafe_characters_are_shown_as_escapes(raw, shown):
    assert printable(raw) == shown
    assert "\n" not in printable(raw) and "\x1b" not in printable(raw)


@pytest.mark.parametrize(
    ("link", "shown"),
    [
        ("https://example.com/v#t=3.0", "https://example.com/v#t=3.0"),
        ("HTTP://example.com/", "HTTP://example.com/"),
        ("/srv/media/9004.mp4#t=1.0", "/srv/media/9004.mp4#t=1.0"),
        ("javascript:alert(1)", "(link not shown: javascript: scheme)"),
        ("file:///etc/passwd", "(link not shown: file: scheme)"),
        ("https://x/\nforged line", "https://x/\\nforged line"),
        ("", ""),
    ],
)
def test_links_only_for_http_and_local_media(link, shown):
    assert safe_link(link) == shown
