"""Basic red-team probes: a dataset transform (``pack.apply_probes``) that
wraps each sample in prompt-injection, jailbreak and planted-secret
templates (``templates``), recording on each probe what the detectors in
``auditkit_ray.metrics.probes`` need. A measurement of how a model behaves
under well-known framings, not an attack generator. Pure Python, no Ray."""
