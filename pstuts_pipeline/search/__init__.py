"""Finding the moment: the Qdrant layout of points, BM25 terms, hybrid scoring, reranking, the LangChain retriever and search metrics."""
