"""The strict pydantic base of every settings model (run files, sweep files,
backend settings): an unknown key is an error, never silently ignored."""

from __future__ import annotations

from pydantic import BaseModel, ConfigDict


class Strict(BaseModel):
    model_config = ConfigDict(extra="forbid", populate_by_name=True)
