"""client: see docs/architecture.md, "Layers"."""
