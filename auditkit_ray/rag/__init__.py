"""Retrieval for RAG evaluation: corpora, BM25/TF-IDF retrievers, the RAG
prompt adapter. Stdlib only; the pipeline runs retrievers in their own CPU
actor pool."""

from .corpus import Corpus, load_corpus
from .retrievers import BM25, TFIDF, make_retriever

__all__ = ["BM25", "TFIDF", "Corpus", "load_corpus", "make_retriever"]
