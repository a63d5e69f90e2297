"""serve: see docs/architecture.md, "Layers"."""
