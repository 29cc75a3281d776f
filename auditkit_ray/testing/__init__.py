"""Helpers for testing evaluations: an OpenAI-compatible server on 127.0.0.1 (and, in ``.s3``, a moto S3 server),
and stored runs and sweeps written without Ray (``.runs``: the layout the comparisons, reports and viewer read)."""

from .openai_server import ModelPolicy, OpenAIServer, ScriptedPolicy
from .runs import build_run, write_run, write_sweep

__all__ = ["ModelPolicy", "OpenAIServer", "ScriptedPolicy", "build_run", "write_run", "write_sweep"]
