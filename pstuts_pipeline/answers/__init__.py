"""Answers in words from search results: extractive or by a chat model, with checked citations, and their metrics."""
