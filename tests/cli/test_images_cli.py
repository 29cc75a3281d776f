"""A text-only backend given an image sample (issue 34): ``run`` exits 2 with one line naming the backend
and the sample, before anything is generated or stored; ``validate`` refuses the same. The real console
script, in a subprocess; the plan fails before Ray starts."""

from __future__ import annotations

from console import console
from image_data import image_dataset

RUN = """name: images
model: {type: echo}
dataset: {path: data/images.jsonl, input_field: question, target_field: answer, images_field: image}
metrics: [exact_match]
store: {path: store}
tracking: {index: false}
"""


def test_a_text_only_backend_given_an_image_sample_exits_2_naming_the_backend_and_the_sample(tmp_path):
    image_dataset(tmp_path / "data", n=2)
    (tmp_path / "run.yaml").write_text(RUN)
    for command in ("run", "validate"):
        r = console(command, "run.yaml", cwd=tmp_path)
        lines = [ln for ln in r.stderr.strip().splitlines() if ln.strip()]
        assert r.returncode == 2 and len(lines) == 1 and "Traceback" not in r.stderr, (command, r.stderr)
        assert "backend 'echo' cannot take images" in lines[0] and "sample 'i0'" in lines[0], lines[0]
    assert not (tmp_path / "store").exists(), "nothing may be generated or stored"
