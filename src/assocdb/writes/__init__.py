"""writes: see docs/architecture.md, "Layers"."""
