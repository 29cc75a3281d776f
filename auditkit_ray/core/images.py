"""Images in prompts: the ``image_url`` content parts a prompt carries, and a local image as a ``data:`` URL.

Stdlib only: backends read these. Which references a dataset may hold is ``data/images.py``'s.
"""

from __future__ import annotations

import base64
import mimetypes
from pathlib import Path
from typing import Any
from urllib.parse import unquote, urlparse

#: suffixes of the local image files read, with the media type their ``data:`` URL names
IMAGE_TYPES = {".png": "image/png", ".jpg": "image/jpeg", ".jpeg": "image/jpeg", ".gif": "image/gif",
               ".webp": "image/webp", ".bmp": "image/bmp"}


def prompt_images(prompt: Any) -> list[str]:
    """The image URLs a built prompt (text, or chat messages as dicts) carries, in order."""
    if isinstance(prompt, str):
        return []
    out = []
    for m in prompt:
        content = m.get("content") if isinstance(m, dict) else None
        if isinstance(content, list):
            out += [p["image_url"]["url"] for p in content if isinstance(p, dict) and p.get("type") == "image_url"]
    return out


def with_images(prompt: str | list[dict], images: list[str]) -> list[dict]:
    """The prompt as chat messages whose (first) user message starts with the image parts, then its text: the
    one place images go. A text prompt becomes a single user message."""
    parts = [{"type": "image_url", "image_url": {"url": u}} for u in images]
    if isinstance(prompt, str):
        return [{"role": "user", "content": [*parts, {"type": "text", "text": prompt}]}]
    msgs = [dict(m) for m in prompt]
    for m in msgs:
        if m.get("role") == "user":
            content = m.get("content")
            old = content if isinstance(content, list) else ([{"type": "text", "text": content}] if content else [])
            m["content"] = [*parts, *old]
            return msgs
    return [*msgs, {"role": "user", "content": parts}]


def file_bytes(url: str) -> bytes:
    """The bytes of a ``file://`` image."""
    return Path(unquote(urlparse(url).path)).read_bytes()


def data_url(url: str) -> str:
    """A ``file://`` image as a base64 ``data:`` URL (other URLs as they are)."""
    if not url.startswith("file://"):
        return url
    path = Path(unquote(urlparse(url).path))
    mime = IMAGE_TYPES.get(path.suffix.lower()) or mimetypes.guess_type(path.name)[0] or "application/octet-stream"
    return f"data:{mime};base64,{base64.b64encode(path.read_bytes()).decode('ascii')}"
