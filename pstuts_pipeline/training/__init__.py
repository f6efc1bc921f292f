"""Fine-tuning the embedder and training the reranker on PsTuts questions, both on one training skeleton."""
