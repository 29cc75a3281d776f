"""The backend registry: one list of backends, each a settings model and an
implementation, that the config's ``model:`` union is built from.

A backend is registered once, by its ``type`` (the value of ``model.type`` in
a run file)::

    register_backend("mine", settings="mypkg.mine:MySettings", impl="mypkg.mine:MyBackend")

``settings`` is a ``BackendSettings`` subclass (or its ``"module:Class"``)
with ``type: Literal["mine"]``; ``impl`` names the ``Backend`` subclass
(``auditkit_ray.backends.base``) that runs it. Both strings are imported
lazily: the settings when a config model is built or a file validated, the
implementation only by ``create_backend`` (in the generation actor), so its
heavy SDK never loads on the driver. The built-in backends register below,
the same way. A package can also register its backends through the entry
point group ``auditkit_ray.backends``: the entry point's name is the backend
type, its value a module (importing it calls ``register_backend``) or a
function (called without arguments, it calls ``register_backend``)::

    [project.entry-points."auditkit_ray.backends"]
    mine = "mypkg.mine"

A module that is not installed can be named in ``AUDITKIT_RAY_BACKENDS``
(modules separated by commas; each calls ``register_backend`` when
imported). Generation runs in Ray actors, other processes: a backend
registered by a call in the driver alone is unknown there, so a backend used
on Ray comes from an entry point or from ``AUDITKIT_RAY_BACKENDS``, which
every process reads.

Every capability the pipeline reads (GPUs, shards in flight, the default
shard size, inline generation, thread safety, loading in a thread, log
probabilities, images, native tool calls, a checkpoint to pin, fetch and hash,
stored outputs to replay, the response cache, the pip extra) is a method (or,
for what the catalogue lists without settings, a class attribute) of the
settings, so it is decided in one place: no code outside ``backends/`` and this
registry compares a backend's type.
"""

from __future__ import annotations

import importlib
import inspect
import os
import re
import typing
from dataclasses import dataclass
from typing import Any, Callable, ClassVar, Iterable, Protocol, Union

from pydantic import Field, model_validator

from ..errors import ConfigError
from .secrets import is_secret_key, redact, remember_secret
from .strict import Strict

ENTRY_POINT_GROUP = "auditkit_ray.backends"
#: modules (comma-separated) that register backends when imported, read like the entry points
MODULES_ENV = "AUDITKIT_RAY_BACKENDS"


# --------------------------------------------------------------------------- settings
class BackendSettings(Strict):
    """Base of every backend's settings (the ``model:`` block of a run file).

    A subclass declares ``type: Literal["<name>"]``, its fields (with
    ``description=`` for the generated docs), which of them do not change
    outputs (``not_in_identity``) and the capabilities that differ from the
    defaults below."""

    type: str

    #: settings that do not change outputs (timeouts, concurrency, secrets): not in the run's identity
    not_in_identity: ClassVar[frozenset[str]] = frozenset()
    #: fields mapping names to values (HTTP headers, an environment): a value under a secret-looking name is
    #: remembered for scrubbing, masked in repr and left out of the identity (the other entries stay in it)
    secret_maps: ClassVar[tuple[str, ...]] = ()
    #: the extra its implementation needs beyond the base install (``pip install 'auditkit-ray[EXTRA]'``, shown
    #: by ``auditkit-ray list``); None when the base install is enough
    extra: ClassVar[str | None] = None

    # ------------------------------------------------------------------ capabilities
    def needs_gpu(self) -> bool:
        """The generation actor requests GPUs (when the cluster has them)."""
        return False

    def shards_in_flight(self) -> int:
        """Shards one generation actor works on at once by default: one for
        a model in the actor (a GPU holds one batch at a time)."""
        return 1

    def default_shard_size(self) -> int:
        """Samples per shard when ``execution.shard_size`` is not set."""
        return 64

    def generates_inline(self) -> bool:
        """A backend with no model and next to no work per request runs in
        the first scoring pool's actors instead of generation actors of its
        own (``execution.generation_actors`` then does not apply)."""
        return False

    def thread_safe(self) -> bool:
        """``generate()`` may be called from several threads at once (a
        generation actor with several shards in flight); otherwise the actor
        makes one call at a time and overlaps the shards' other work."""
        return False

    def load_in_thread(self) -> bool:
        """``load()`` may run in another thread than ``generate()``: the
        generation actor then starts loading as soon as it is created, while
        Ray Data starts the rest of the pipeline."""
        return False

    def supports_logprobs(self) -> bool:
        """The backend can report top log-probabilities (judges ask for them)."""
        return False

    def stays_loaded(self) -> bool:
        """What its generation actor loads is worth keeping between commands (a model in memory, an HTTP
        client and its connections): where resident engines are on (``execution.resident``), its actors
        outlive the run and serve the next one with the same settings. A backend whose load costs nothing, or
        that imports user code (whose files may change between commands), says False."""
        return False

    def takes_images(self) -> bool:
        """Prompts may carry images (``image_url`` content parts); a run whose samples have images on a
        backend that says False fails at planning, naming the backend and the sample, instead of dropping
        them."""
        return False

    def fetches_image_urls(self) -> bool:
        """An ``https://`` image may be passed on as a URL (the backend's server fetches it); otherwise
        only local files and ``data:`` URLs are taken."""
        return False

    def reads_targets(self) -> bool:
        """What it generates may depend on a request's target (or on anything of the sample besides its
        prompt). A backend that reads only the prompt says False: a changed target then leaves its stored
        generations valid, and only the scores are redone."""
        return True

    def images_advice(self) -> str:
        """When ``takes_images`` says False: what would make it take them, as a phrase after the backend's
        name in the planning error ("with endpoint 'completions' (use endpoint: chat)"); empty for none."""
        return ""

    def calls_tools(self) -> bool:
        """Native tool calling: each request's metadata carries the sample's tool schemas and history
        (``agents.dataset.agent_request_metadata``)."""
        return False

    def checkpoint_path(self) -> str | None:
        """The HF-format checkpoint it loads (a local directory, a Hub id or an ``s3://`` prefix): the plan
        checks or pins it, the generation actor fetches it into its node's cache, and the model identity
        records its content (``auditkit_ray.sources``). None: no checkpoint (``CheckpointSettings`` has one)."""
        return None

    def stored_inputs(self) -> str | None:
        """A file or directory of stored results the backend replays as its outputs (``precomputed``): it must
        be there before the run starts, lies under the data root, and its content hash is the model's
        identity. None: it reads none."""
        return None

    @classmethod
    def replays_generations(cls) -> bool:
        """Its outputs are stored ones it reads, not generated: a run of it takes nothing from the generation
        cache (``auditkit-ray cache stats`` counts no hits for it). A class method: the cache tool reads it for
        stored runs, from their backend's type."""
        return False

    @classmethod
    def caches_responses(cls) -> bool:
        """It keeps its responses in the response cache (an HTTP backend), whose hits a run's ``perf.cached``
        counts. A class method, read like ``replays_generations``."""
        return False

    # ------------------------------------------------------------------ identity and secrets
    def settings_identity(self) -> dict[str, Any]:
        """Backend settings that change outputs (secrets excluded by the fingerprint)."""
        out = self.model_dump(mode="json", exclude=set(self.not_in_identity) | set(self.secret_maps))
        for name in self.secret_maps:
            out[name] = {k: v for k, v in sorted((getattr(self, name) or {}).items()) if not is_secret_key(k)}
        return out

    @model_validator(mode="after")
    def _remember_secret_values(self) -> "BackendSettings":
        for name in self.secret_maps:
            for k, value in (getattr(self, name) or {}).items():
                if is_secret_key(k):
                    remember_secret(value)
        return self

    def __repr_args__(self):  # type: ignore[override]
        for k, v in super().__repr_args__():
            yield k, (redact(v) if k in self.secret_maps else v)


class CheckpointSettings(BackendSettings):
    """Settings of a backend that loads an HF-format checkpoint (``hf``, ``vllm``, or a plugin's subclass):
    where it lives. Its ``checkpoint_path`` is ``path``, so the plan pins a Hub id or an ``s3://`` prefix, the
    model identity hashes a local directory's files, and the generation actor hands the backend a copy whose
    ``path`` is a local directory (``auditkit_ray.sources``): nothing else to write for any of it."""

    path: str = Field(description="a local directory of an HF-format checkpoint, a Hub id (org/name) or an "
                      "s3:// prefix holding one (docs/models-and-data.md)")
    revision: str | None = Field(None, description="of a Hub id: a branch, tag or commit, pinned to its commit "
                                 "when the run is planned")
    endpoint_url: str | None = Field(None, description="of an s3:// path: the S3-compatible endpoint "
                                     "(default: AWS_ENDPOINT_URL)")
    region: str | None = Field(None, description="of an s3:// path (default: AWS_DEFAULT_REGION)")

    not_in_identity: ClassVar[frozenset[str]] = frozenset({"endpoint_url", "region"})

    def reads_targets(self) -> bool:
        return False  # a checkpoint sees its prompt only

    def stays_loaded(self) -> bool:
        return True  # a checkpoint's load is the cost: its identity is its content (``model_identity``)

    def checkpoint_path(self) -> str | None:
        return self.path


class BackendServices(Protocol):
    """What the actor layer lends a backend that reads stored results (the
    ``precomputed`` backend), so that backends never import the store or the
    dataset readers."""

    def read_samples_table(self, path: str) -> list[dict[str, Any]]:
        """The per-sample rows of a stored run (a run directory or its ``result.json``)."""

    def read_records(self, path: str) -> Iterable[tuple[str, dict[str, Any]]]:
        """``(where, record)`` for each record of a JSONL/JSON/CSV/Parquet file."""


# --------------------------------------------------------------------------- registry
@dataclass
class _Entry:
    settings: Any  # a BackendSettings subclass, or "module:Class" until resolved
    impl: Any  # a Backend subclass, or "module:Class" until resolved


_REGISTRY: dict[str, _Entry] = {}
_LISTENERS: list[Callable[[], None]] = []
_TYPE = re.compile(r"^[A-Za-z][A-Za-z0-9_.-]*$")
_state = {"version": 0, "entry_points": "unread", "quiet": False}


def register_backend(type: str, *, settings: type[BackendSettings] | str, impl: type | str) -> None:
    """Make backend ``type`` available to run files, judges and ``create_backend``.

    Registering a type again replaces it. Config models built before the call
    are rebuilt, so a file using the new type validates at once."""
    if not isinstance(type, str) or not _TYPE.match(type):
        raise ValueError(f"a backend type is a name of letters, digits, '_', '-' and '.', got {type!r}")
    for what, ref in (("settings", settings), ("impl", impl)):
        if isinstance(ref, str):
            if ":" not in ref:
                raise ValueError(f"backend {type!r}: {what} must be a class or 'package.module:Class', got {ref!r}")
        elif not inspect.isclass(ref):
            raise TypeError(f"backend {type!r}: {what} must be a class or 'package.module:Class', got {ref!r}")
    if inspect.isclass(settings):
        _check_settings(type, settings)
    _REGISTRY[type] = _Entry(settings, impl)
    _changed()


def unregister_backend(type: str) -> None:
    """Remove a registered backend (tests that register their own use it to clean up)."""
    if _REGISTRY.pop(type, None) is not None:
        _changed()


def on_backends_changed(callback: Callable[[], None]) -> None:
    """Call ``callback`` after each change of the registry (config models rebuild themselves)."""
    _LISTENERS.append(callback)


def registry_version() -> int:
    """A number that changes with every registration (to cache what is built from the registry)."""
    _load_entry_points()
    return _state["version"]


def backend_types() -> list[str]:
    """The registered backend types, in the order they were registered."""
    _load_entry_points()
    return list(_REGISTRY)


def backend_settings(type: str) -> type[BackendSettings]:
    """The settings model of backend ``type``."""
    entry = _entry(type)
    if isinstance(entry.settings, str):
        cls = _import(entry.settings, f"backend {type!r} settings")
        if not inspect.isclass(cls):
            raise ConfigError(f"backend {type!r}: settings {entry.settings} is not a class")
        _check_settings(type, cls)
        entry.settings = cls
    return entry.settings


def backend_impl(type: str) -> type:
    """The implementation class of backend ``type`` (imported on first use)."""
    entry = _entry(type)
    if isinstance(entry.impl, str):
        cls = _import(entry.impl, f"backend {type!r}")
        if not inspect.isclass(cls):
            raise ConfigError(f"backend {type!r}: {entry.impl} is not a class")
        entry.impl = cls
    return entry.impl


def settings_class(type: str) -> type[BackendSettings] | None:
    """The settings model of backend ``type``, or None when none is registered (a stored run of a backend that
    is not installed here): for reading a class capability of a stored run's backend."""
    try:
        return backend_settings(type)
    except ConfigError:
        return None


def create_backend(spec: Any, generation: Any, seed: int = 0, services: BackendServices | None = None) -> Any:
    """An (unloaded) backend for validated settings ``spec``. ``services``
    reach the backend as ``backend.services`` (see ``BackendServices``)."""
    backend = backend_impl(spec.type)(spec, generation, seed)
    if services is not None:
        backend.services = services
    return backend


def settings_union() -> Any:
    """The type of a backend spec: a union of every registered settings
    model, discriminated by ``type``, for pydantic."""
    from pydantic import Field

    classes = tuple(backend_settings(t) for t in backend_types())
    if len(classes) == 1:
        return classes[0]
    return typing.Annotated[Union[classes], Field(discriminator="type")]


# --------------------------------------------------------------------------- helpers
def _entry(type: str) -> _Entry:
    _load_entry_points()
    entry = _REGISTRY.get(type)
    if entry is None:
        from .suggest import did_you_mean

        raise ConfigError(f"unknown backend type {type!r}{did_you_mean(type, _REGISTRY)} "
                          f"(registered: {', '.join(_REGISTRY)})")
    return entry


def _check_settings(type: str, cls: type) -> None:
    if not issubclass(cls, BackendSettings):
        raise TypeError(f"backend {type!r}: settings {cls.__qualname__} is not a BackendSettings subclass")
    field = cls.model_fields.get("type")
    annotation = field.annotation if field is not None else None
    if typing.get_origin(annotation) is not typing.Literal or typing.get_args(annotation) != (type,):
        raise TypeError(f"backend {type!r}: settings {cls.__qualname__} must declare type: Literal[{type!r}]")


def _import(ref: str, what: str) -> Any:
    module_name, _, attr = ref.partition(":")
    try:
        obj: Any = importlib.import_module(module_name)
    except ImportError as exc:
        raise ConfigError(f"{what}: cannot import {module_name!r} ({exc})") from None
    for part in attr.split("."):
        obj = getattr(obj, part, None)
        if obj is None:
            raise ConfigError(f"{what}: module {module_name!r} has no attribute {attr!r}")
    return obj


def _changed() -> None:
    _state["version"] += 1
    if _state["quiet"]:
        return
    for callback in list(_LISTENERS):
        callback()


def _load_entry_points() -> None:
    """Backends of installed packages (entry point group ``auditkit_ray.backends``)
    and of the modules named in ``AUDITKIT_RAY_BACKENDS``, once per process."""
    if _state["entry_points"] != "unread":
        return
    _state["entry_points"] = "reading"
    from importlib.metadata import entry_points

    from .imports import import_user_module

    before = _state["version"]
    _state["quiet"] = True  # one rebuild of the config models for all of them, below
    try:
        for ep in entry_points(group=ENTRY_POINT_GROUP):
            try:
                obj = ep.load()
            except Exception as exc:  # noqa: BLE001 - any error of a plugin's import names the plugin
                raise ConfigError(f"backend entry point {ep.name} = {ep.value!r}: cannot load it: "
                                  f"{type(exc).__name__}: {exc}") from exc
            if callable(obj) and not inspect.isclass(obj):
                obj()
            if ep.name not in _REGISTRY:
                raise ConfigError(f"backend entry point {ep.name} = {ep.value!r} registered no backend {ep.name!r} "
                                  f"(it must call auditkit_ray.core.backends.register_backend({ep.name!r}, ...))")
        for name in (m.strip() for m in os.environ.get(MODULES_ENV, "").split(",")):
            if name:
                import_user_module(name, f"{MODULES_ENV} module")
    finally:
        _state["quiet"] = False
        _state["entry_points"] = "read"
    if _state["version"] != before:
        _changed()


# --------------------------------------------------------------------------- built-ins
# registered as a user's backend is: by name, imported only when used
for _type, _settings, _impl in (
    ("echo", "EchoSettings", "EchoBackend"),
    ("simulated", "SimulatedSettings", "SimulatedBackend"),
    ("hf", "HFSettings", "HFBackend"),
    ("precomputed", "PrecomputedSettings", "PrecomputedBackend"),
    ("agent", "AgentSettings", "AgentBackend"),
    ("vllm", "VLLMSettings", "VLLMBackend"),
    ("api", "APISettings", "APIBackend"),
    ("command", "CommandSettings", "CommandBackend"),
):
    register_backend(_type, settings=f"auditkit_ray.backends.{_type}:{_settings}",
                     impl=f"auditkit_ray.backends.{_type}:{_impl}")
del _type, _settings, _impl
