"""``auditkit-ray view``: a local, read-only web app over the experiment history (a second front end on the
facade, beside the CLI). ``serve`` starts it; ``make_app`` builds the aiohttp application (aiohttp loads here)."""

from .server import make_app, serve

__all__ = ["make_app", "serve"]
