"""Tiny PNG images and a dataset of images and questions, written by the tests (no binaries committed)."""

from __future__ import annotations

import json
import struct
import zlib
from pathlib import Path


def png(rgb: tuple[int, int, int], w: int = 2, h: int = 2) -> bytes:
    """A valid ``w`` x ``h`` PNG of one colour (stdlib only)."""
    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data) & 0xFFFFFFFF)

    raw = b"".join(b"\0" + bytes(rgb) * w for _ in range(h))
    return (b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))
            + chunk(b"IDAT", zlib.compress(raw)) + chunk(b"IEND", b""))


COLOURS = {"red": (255, 0, 0), "green": (0, 160, 0), "blue": (0, 0, 255), "white": (255, 255, 255)}


def image_dataset(folder: Path, n: int = 4) -> Path:
    """``folder/images.jsonl``: ``n`` samples, each a question about ``img/<colour>.png`` (a path relative to
    the dataset file) whose target is the colour."""
    (folder / "img").mkdir(parents=True, exist_ok=True)
    rows = []
    for i, (name, rgb) in enumerate(list(COLOURS.items())[:n]):
        (folder / "img" / f"{name}.png").write_bytes(png(rgb))
        rows.append({"id": f"i{i}", "question": "Which colour is this image?", "answer": name,
                     "image": f"img/{name}.png"})
    path = folder / "images.jsonl"
    path.write_text("".join(json.dumps(r) + "\n" for r in rows))
    return path


#: a seed of the tiny vision model whose answers to one question differ for each of its four images (its
#: weights are random: under some seeds two images decode to the same replacement characters)
TINY_VLM_SEED = 1


def build_tiny_vlm(out: Path, seed: int = TINY_VLM_SEED) -> Path:
    """The repo's tiny vision-language model and its images (``examples/tiny_vlm/build.py``: random weights,
    no download) built into ``out``."""
    import importlib.util

    script = Path(__file__).resolve().parents[2] / "examples" / "tiny_vlm" / "build.py"
    loaded = importlib.util.spec_from_file_location("tiny_vlm_build", script)
    module = importlib.util.module_from_spec(loaded)
    loaded.loader.exec_module(module)
    return module.build(out, seed=seed)
