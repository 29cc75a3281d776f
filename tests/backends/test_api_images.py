"""The ``api`` backend sends a prompt's images as ``image_url`` content parts (issue 34), against the
OpenAI-compatible test server (real HTTP on 127.0.0.1): a local file arrives as a base64 data URL of its
exact bytes; data and https URLs arrive unchanged."""

from __future__ import annotations

import base64

import pytest

pytest.importorskip("aiohttp", reason="the api backend needs the 'api' extra (aiohttp)")

from image_data import png  # noqa: E402  (tests/support)

from auditkit_ray.backends.api import APIBackend, APISettings  # noqa: E402
from auditkit_ray.backends.base import Request  # noqa: E402
from auditkit_ray.config.models import GenerationSettings  # noqa: E402
from auditkit_ray.core.images import with_images  # noqa: E402
from auditkit_ray.testing import OpenAIServer, ScriptedPolicy  # noqa: E402


def test_the_server_receives_each_image_part_byte_for_byte_in_order_before_the_text(tmp_path):
    local = tmp_path / "red.png"
    local.write_bytes(png((255, 0, 0), w=5, h=3))
    inline = png((0, 0, 255))
    data = "data:image/png;base64," + base64.b64encode(inline).decode()
    https = "https://images.example.org/cat.png?size=2"
    prompt = with_images("Describe these.", [local.as_uri(), data, https])
    with OpenAIServer(ScriptedPolicy("seen")) as server:
        spec = APISettings(type="api", base_url=server.base_url, model="m", cache=False)
        backend = APIBackend(spec, GenerationSettings(max_new_tokens=4), seed=0)
        (gen,) = backend.generate([Request(sample_id="s1", prompt=prompt)])
        backend.close()
        (body,) = server.bodies
    assert gen.error is None and gen.text == "seen"
    (msg,) = body["messages"]
    parts = msg["content"]
    assert [p["type"] for p in parts] == ["image_url", "image_url", "image_url", "text"]
    head, _, b64 = parts[0]["image_url"]["url"].partition(",")
    assert head == "data:image/png;base64" and base64.b64decode(b64) == local.read_bytes()
    assert parts[1]["image_url"]["url"] == data and parts[2]["image_url"]["url"] == https
    assert parts[3] == {"type": "text", "text": "Describe these."}
    assert str(tmp_path) not in str(body), "the server never sees the evaluator's file paths"
