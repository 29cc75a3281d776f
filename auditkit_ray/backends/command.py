"""``command``: run a program once per sample and read its output.

The program is an argv list and never goes through a shell. The prompt goes
to the program's stdin, or, when an argv element holds ``{prompt}``, into that
element (``stdin: true`` sends it on stdin as well). Chat prompts are sent as
their JSON. ``{sample_id}``, ``{repeat}`` and ``{seed}`` (a per-request seed
derived from the run seed, the sample id and the repeat) are replaced too;
the same values and the generation settings are in the environment
(``AUDITKIT_SAMPLE_ID``, ``AUDITKIT_REPEAT``, ``AUDITKIT_SEED``,
``AUDITKIT_MAX_NEW_TOKENS``, ``AUDITKIT_TEMPERATURE``, ``AUDITKIT_TOP_P``,
``AUDITKIT_STOP`` as JSON).

stdout is the output (``raw_text`` untouched; ``text`` stripped of
surrounding whitespace unless ``strip: false``, then cut at the first stop
string). A non-zero exit status or a timeout becomes ``Generation.error``
with the tail of stderr; it never stops the run. A program that cannot be
found stops the run when the backend loads.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import time
from typing import Any, ClassVar, Literal

from pydantic import Field

from ..core.backends import BackendSettings
from ..core.secrets import scrub_text
from ..core.types import Generation
from ..errors import RunError
from .base import Backend, Request, map_concurrently
from .seeds import seed31

PLACEHOLDER = "{prompt}"
STDERR_TAIL = 1000


class CommandSettings(BackendSettings):
    """Runs a program per sample (an argv list, never a shell). The prompt goes
    on stdin, or into the argv elements that hold ``{prompt}``; stdout is the
    output."""

    type: Literal["command"]
    argv: list[str] = Field(min_length=1, description="program and arguments; {prompt}, {sample_id}, {repeat}, "
                            "{seed} are replaced")
    stdin: bool | None = Field(None, description="send the prompt on stdin (default: when no argument holds "
                               "{prompt})")
    timeout_s: float = Field(60.0, gt=0)
    env: dict[str, str] = Field(default_factory=dict, description="extra environment; values under secret-looking "
                                "names are masked and never fingerprinted")
    cwd: str | None = None
    strip: bool = Field(True, description="text = stdout without surrounding whitespace (raw_text keeps it)")
    concurrency: int = Field(1, ge=1, description="processes at once inside one generation actor")
    batch_size: int = Field(16, ge=1)

    not_in_identity: ClassVar[frozenset[str]] = frozenset({"timeout_s", "concurrency", "batch_size", "cwd"})
    secret_maps: ClassVar[tuple[str, ...]] = ("env",)


class CommandBackend(Backend):
    def __init__(self, spec: Any, generation: Any, seed: int = 0) -> None:
        super().__init__(spec, generation, seed)
        self._exe: str | None = None

    def load(self) -> None:
        prog = self.spec.argv[0]
        if os.sep in prog:
            cand = prog if os.path.isabs(prog) or not self.spec.cwd else os.path.join(self.spec.cwd, prog)
            found = os.path.abspath(cand) if os.path.isfile(cand) and os.access(cand, os.X_OK) else None
        else:
            found = shutil.which(prog)
        if found is None:
            raise RunError(f"command backend: program {prog!r} not found or not executable")
        self._exe = found

    @property
    def uses_stdin(self) -> bool:
        if self.spec.stdin is not None:
            return self.spec.stdin
        return not any(PLACEHOLDER in a for a in self.spec.argv)

    def generate(self, requests: list[Request]) -> list[Generation]:
        if self._exe is None:
            self.load()
        return map_concurrently(self._run, requests, self.spec.concurrency)

    def argv_for(self, r: Request) -> tuple[list[str], str]:
        prompt = r.prompt if isinstance(r.prompt, str) else json.dumps(r.prompt, ensure_ascii=False)
        seed = seed31(self.seed, r.sample_id, r.repeat)
        subs = {"{prompt}": prompt, "{sample_id}": r.sample_id, "{repeat}": str(r.repeat), "{seed}": str(seed)}
        argv = []
        for a in self.spec.argv:
            # one pass over the placeholders: a prompt holding "{seed}" stays as written
            out, i = [], 0
            while i < len(a):
                for ph, val in subs.items():
                    if a.startswith(ph, i):
                        out.append(val)
                        i += len(ph)
                        break
                else:
                    out.append(a[i])
                    i += 1
            argv.append("".join(out))
        return argv, prompt

    def _env(self, r: Request) -> dict[str, str]:
        g = self.generation
        env = {**os.environ, **self.spec.env}
        env.update(
            AUDITKIT_SAMPLE_ID=r.sample_id,
            AUDITKIT_REPEAT=str(r.repeat),
            AUDITKIT_SEED=str(seed31(self.seed, r.sample_id, r.repeat)),
        )
        if g is not None:
            env.update(
                AUDITKIT_MAX_NEW_TOKENS=str(g.max_new_tokens),
                AUDITKIT_TEMPERATURE=repr(float(g.temperature)),
                AUDITKIT_TOP_P=repr(float(g.top_p)),
                AUDITKIT_STOP=json.dumps(list(g.stop)),
            )
        return env

    def _run(self, r: Request) -> Generation:
        if (r.metadata or {}).get("tools"):
            return Generation(
                error="command backend: this request carries tool schemas, which a command cannot be sent "
                "natively (use the 'api' or 'agent' backend)"
            )
        argv, prompt = self.argv_for(r)
        argv[0] = self._exe or argv[0]
        stdin = prompt if self.uses_stdin else ""
        t0 = time.perf_counter()
        try:
            proc = subprocess.run(argv, input=stdin.encode("utf-8"), capture_output=True, timeout=self.spec.timeout_s,
                                  env=self._env(r), cwd=self.spec.cwd, shell=False, check=False)
        except subprocess.TimeoutExpired as exc:
            tail = (exc.stderr or b"")[-STDERR_TAIL:].decode("utf-8", "replace").strip()
            msg = f"command timed out after {self.spec.timeout_s:g}s" + (f"; stderr: {tail}" if tail else "")
            return Generation(error=scrub_text(msg), latency_s=time.perf_counter() - t0, latency_scope="request")
        except OSError as exc:
            return Generation(error=scrub_text(f"command could not start: {exc}"))
        latency = time.perf_counter() - t0
        out = proc.stdout.decode("utf-8", "replace")
        if proc.returncode != 0:
            tail = proc.stderr[-STDERR_TAIL:].decode("utf-8", "replace").strip()
            msg = f"command exited with status {proc.returncode}" + (f"; stderr: {tail}" if tail else " (no stderr)")
            return Generation(error=scrub_text(msg), raw_text=out, latency_s=latency, latency_scope="request")
        text = out.strip() if self.spec.strip else out
        finish = "stop"
        stops = [s for s in (self.generation.stop if self.generation is not None else []) if s]
        cut = min((p for p in (text.find(s) for s in stops) if p >= 0), default=-1)
        if cut >= 0:
            text = text[:cut]
        return Generation(text=text, raw_text=out, latency_s=latency, latency_scope="request", finish_reason=finish,
                          metadata={"returncode": 0})
