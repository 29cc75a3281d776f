"""The driver side of a run: plan (``plan``), run the Ray Data pipeline
(``driver``), merge (``merge``), sweeps (``sweep``), and the Ray runtime
(``runtime``; Ray's private APIs only in ``ray_compat``). The stages that run
in the pipeline's actors are ``actors/``'s."""
