"""api: see docs/architecture.md, "Layers"."""
