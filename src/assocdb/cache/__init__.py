"""cache: see docs/architecture.md, "Layers"."""
