"""Reports: terminal tables (more formats in later versions)."""
