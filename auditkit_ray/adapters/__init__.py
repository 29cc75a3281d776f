"""Adapters turn a Sample (and its raw record) into a backend request."""

from .prompt import PromptAdapter, render

__all__ = ["PromptAdapter", "render"]
