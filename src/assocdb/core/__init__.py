"""core: see docs/architecture.md, "Layers"."""
