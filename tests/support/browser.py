"""A headless Chromium for the console's tests: Debian's `chromium` and `chromium-driver`
through Selenium, never a downloaded browser (Selenium Manager is bypassed by naming
the driver). Skips without them, unless ASSOCDB_TEST_REQUIRE_SERVICES=1 (then fails);
`.ci/run` installs them.

Also an in-process server (uvicorn on a thread) over a Graph the test holds, so a
test can inject faults into the very graph the browser looks at.
"""

from __future__ import annotations

import os
import shutil
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from tests.support.http_server import free_port

CHROMIUM = "/usr/bin/chromium"
CHROMEDRIVER = "/usr/bin/chromedriver"
FLAGS = (
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--no-first-run",
    "--disable-quic",
    "--disable-sync",
    "--disable-dev-shm-usage",
    "--window-size=1280,900",
)


def require_browser() -> None:
    missing = [p for p in (CHROMIUM, CHROMEDRIVER) if not os.access(p, os.X_OK)]
    if missing or shutil.which("chromium") is None:
        if os.environ.get("ASSOCDB_TEST_REQUIRE_SERVICES") == "1":
            pytest.fail(f"{', '.join(missing)} missing: apt-get install chromium chromium-driver")
        pytest.skip("chromium and chromium-driver are not installed")
    pytest.importorskip("selenium")


@contextmanager
def chromium(profile: Path) -> Iterator[Any]:
    """A headless Chromium with a fresh profile in `profile`."""
    require_browser()
    from selenium import webdriver
    from selenium.webdriver.chrome.service import Service

    os.environ.setdefault("SE_OFFLINE", "true")  # Selenium Manager must never download
    options = webdriver.ChromeOptions()
    options.binary_location = CHROMIUM
    for flag in FLAGS:
        options.add_argument(flag)
    options.add_argument(f"--user-data-dir={profile}")
    options.set_capability("goog:loggingPrefs", {"browser": "ALL"})  # for severe()
    driver = webdriver.Chrome(options=options, service=Service(executable_path=CHROMEDRIVER))
    driver.set_page_load_timeout(30)
    try:
        yield driver
    finally:
        driver.quit()


def severe(driver: Any) -> list[str]:
    """The SEVERE entries of the browser's console since the last call (a failed
    load, a script error, a refused resource), each as its message."""
    return [e["message"] for e in driver.get_log("browser") if e["level"] == "SEVERE"]


class ThreadServer:
    """An ASGI app served by uvicorn on a thread of this process."""

    def __init__(self, app: Any) -> None:
        import uvicorn

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(app, host="127.0.0.1", port=self.port, log_level="warning")
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(target=self._server.run, daemon=True)
        self._thread.start()
        from tests.support.helpers import wait_until

        wait_until(lambda: self._server.started or not self._thread.is_alive(), 30)
        assert self._server.started, "the server did not start"

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(30)
