"""The `pstuts` command and what only it uses: the in-process ingest runner and its SQLite batching."""
