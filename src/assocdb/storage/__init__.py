"""storage: see docs/architecture.md, "Layers"."""
