"""Helpers for testing evaluations: an OpenAI-compatible server on 127.0.0.1 (and, in ``.s3``, a moto S3 server)."""

from .openai_server import ModelPolicy, OpenAIServer, ScriptedPolicy

__all__ = ["ModelPolicy", "OpenAIServer", "ScriptedPolicy"]
