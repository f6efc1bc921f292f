"""From phrases to timed chunks: time repair, Kamradt chunking capped at the embedder's window, and the checks on them."""
