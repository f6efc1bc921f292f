"""Secrets out of every message that leaves the process: provider errors, the event log, the CLI's output."""

from __future__ import annotations

import re
from urllib.parse import urlsplit, urlunsplit

from pstuts_pipeline.settings import env

# Environment variables that hold secrets; their values are blanked wherever they appear. test_secrets.py derives
# the list from the variables the code reads (every *_API_KEY, *_PASSWORD, *_TOKEN), so a new one is not forgotten.
SECRET_VARIABLES = ("OPENAI_API_KEY", "PSTUTS_CHAT_API_KEY", "QDRANT_API_KEY", "DAGSTER_PG_PASSWORD")
# Shorter values would blank ordinary words ("any" is a test key): the patterns below still catch them as keys.
MIN_SECRET_LENGTH = 8
PATTERNS = (
    re.compile(r"(?i)(\bbearer\s+)[^\s\"',;}\]]+"),  # an Authorization header, echoed
    re.compile(r"(?i)(\bapi[-_]?key[\"']?\s*[:=]\s*[\"']?)[^\s\"',;}\]]+"),  # api-key: ..., "api_key": "..."
    re.compile(r"()\bsk-[A-Za-z0-9_-]{8,}"),  # an OpenAI-style key anywhere
    re.compile(r"(?i)(\b[a-z][a-z0-9+.-]*://)[^/\s@]+@"),  # credentials in any URL: http://user:pass@host
)
REDACTED = "[redacted]"


def configured_secrets() -> set[str]:
    """The secret values set now: each secret variable's, and a URL setting's credentials (whole, and the password)."""
    values = {env(name) for name in SECRET_VARIABLES}
    for name in URL_VARIABLES:
        url = env(name)
        if has_credentials(url):
            userinfo = urlsplit(url).netloc.rpartition("@")[0]
            values |= {userinfo, userinfo.partition(":")[2]}
    return {value for value in values if len(value) >= MIN_SECRET_LENGTH}


def redact(text: str) -> str:
    """The text with every configured secret and anything shaped like a key or bearer token blanked."""
    for value in sorted(configured_secrets(), key=len, reverse=True):
        text = text.replace(value, REDACTED)
    for pattern in PATTERNS:
        text = pattern.sub(lambda m: m.group(1) + REDACTED + ("@" if m.group().endswith("@") else ""), text)
    return text


# Settings whose value is a URL that may carry credentials (http://user:pass@host): never printed, logged or
# stored as they are, and never part of an id.
URL_VARIABLES = ("OPENAI_BASE_URL", "QDRANT_URL", "PSTUTS_CHAT_BASE_URL")


def has_credentials(url: str | None) -> bool:
    """Whether a URL carries a user name or password."""
    try:
        return bool(url) and "@" in (urlsplit(url).netloc or "")
    except ValueError:
        return False


def strip_credentials(url: str) -> str:
    """The URL without user name and password; a URL without them comes back exactly as given (ids stay put)."""
    if not has_credentials(url):
        return url
    parts = urlsplit(url)
    return urlunsplit(parts._replace(netloc=parts.netloc.rpartition("@")[2]))
