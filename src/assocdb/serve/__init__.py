"""serve: see docs/architecture.md, "Layers".

The HTTP server is the server extra's (starlette, uvicorn, prometheus-client):
importing this layer without it fails with MissingExtra, saying what to install.
"""

from ..core.extras import require

for _module in ("starlette", "prometheus_client"):
    require(_module, "server", "assocdb's HTTP server (assocdb.serve)")
