"""Answers in words from search results: extractive or by a chat model, with checked citations, and their metrics."""

# The fixed sample `pstuts evaluate` and the answer_evaluation asset answer, here so that loading the definitions
# does not import the answering code (LangChain's chat models, Qdrant's client).
SAMPLE_SIZE = 200
SAMPLE_SEED = 12
# Chunks given to the chat model: three excerpts fit a small model's attention and the 15 s link tolerance.
TOP_K = 3
