"""The Ray pipeline: plan (driver), stages (actors), merge (driver)."""
