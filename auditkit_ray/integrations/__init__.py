"""Optional integrations (MLflow; lm-evaluation-harness later)."""
