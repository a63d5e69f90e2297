"""The operator's console: server-rendered pages under /admin (see docs/operations.md).

`pages.Console` holds the routes, `session` the login cookie and CSRF
tokens, `live` the ring buffer the overview draws; templates and the small
CSS and script ship in this package (no build step).
"""

from ...core.extras import require

require("jinja2", "server", "the operator's console (assocdb.serve.console)")
