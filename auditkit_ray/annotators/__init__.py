"""Annotators extract a scoreable value from an output; the raw output is never altered."""

from .extract import apply_annotators, build_annotator

__all__ = ["apply_annotators", "build_annotator"]
