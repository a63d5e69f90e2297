"""cli: see docs/architecture.md, "Layers"."""
