"""Fixtures for the browser tests: headless Chromium, the test host page, real demo answers."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, ConsoleMessage, Frame, Page, Playwright, sync_playwright

from pvesim.server import SimServer
from tests.views.support import ARTIFACTS, CHROMIUM, CHROMIUM_ARGS, capture, serve_host


@pytest.fixture(scope="package")  # Playwright runs a loop: end it with this package
def playwright() -> Iterator[Playwright]:
    with sync_playwright() as p:
        yield p


@pytest.fixture(scope="package")  # Playwright runs a loop: end it with this package
def browser(playwright: Playwright) -> Iterator[Browser]:
    if not Path(CHROMIUM).exists():
        need = "apt-get install chromium-headless-shell (.ci/run does)"
        pytest.fail(f"the view tests need headless Chromium at {CHROMIUM}: {need}")
    b = playwright.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS)
    yield b
    b.close()


@pytest.fixture(scope="package")  # Playwright runs a loop: end it with this package
def host_url() -> Iterator[str]:
    with serve_host() as url:
        yield url


@pytest.fixture(scope="package")  # Playwright runs a loop: end it with this package
def granular_demo(demo_sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return capture(demo_sim, tmp_path_factory.mktemp("granular"), granular=True)


@pytest.fixture(scope="package")  # Playwright runs a loop: end it with this package
def meta_demo(demo_sim: SimServer, tmp_path_factory: pytest.TempPathFactory) -> dict[str, Any]:
    return capture(demo_sim, tmp_path_factory.mktemp("meta"), granular=False)


@dataclass
class Shown:
    page: Page
    errors: list[str] = field(default_factory=list)
    dialogs: list[str] = field(default_factory=list)

    @property
    def view(self) -> Frame:
        frame = self.page.locator("#view").element_handle().content_frame()
        assert frame is not None
        return frame

    def text(self) -> str:
        return self.view.locator("#app").inner_text()

    def screenshot(self, name: str, also: Path | None = None) -> None:
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        height = self.page.evaluate("() => document.getElementById('view').getBoundingClientRect().height")
        self.page.set_viewport_size({"width": 1040, "height": int(height) + 20})
        self.page.wait_for_timeout(100)
        shot = self.page.locator("#view").screenshot(path=str(ARTIFACTS / f"{name}.png"))
        if also is not None:
            also.parent.mkdir(parents=True, exist_ok=True)
            also.write_bytes(shot)


def watch(page: Page) -> Shown:
    shown = Shown(page)

    def on_console(msg: ConsoleMessage) -> None:
        if msg.type in ("error", "warning"):
            shown.errors.append(f"{msg.type}: {msg.text}")

    page.on("console", on_console)
    page.on("pageerror", lambda exc: shown.errors.append(f"pageerror: {exc}"))

    def on_dialog(dialog: Any) -> None:
        shown.dialogs.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", on_dialog)
    return shown


@pytest.fixture
def show(browser: Browser, host_url: str) -> Iterator[Callable[..., Shown]]:
    """Load a view in the test host with a tool result; wait until it has rendered."""
    pages: list[Page] = []

    def _show(
        demo: dict[str, Any],
        op: str,
        *,
        result: dict[str, Any] | None = None,
        theme: str = "light",
        server_tools: bool = True,
        styles: dict[str, Any] | None = None,
        ready: str = "#app[data-view] h1",
    ) -> Shown:
        page = browser.new_page(viewport={"width": 1040, "height": 800}, color_scheme=theme)  # type: ignore[arg-type]
        pages.append(page)
        shown = watch(page)
        call = demo["results"][op]
        tool = demo["tools"][call["name"]]
        uri = tool["_meta"]["ui"]["resourceUri"]
        page.goto(host_url)
        # one JSON string: Playwright serializes and validates an object argument value by value, in Python
        page.evaluate(
            "s => window.startHost(JSON.parse(s))",
            json.dumps(
                {
                    "html": demo["resources"][uri]["text"],
                    "result": result if result is not None else call["result"],
                    "arguments": call["arguments"],
                    "toolName": call["name"],
                    "theme": theme,
                    "serverTools": server_tools,
                    "styles": styles,
                    # what this view can ask for: every view's reads and its own later pages (every page of every
                    # view was 2.9 MB at 2,000 guests, handed into each page shown)
                    "reads": {
                        r["key"]: r["result"]
                        for name, r in demo["reads"].items()
                        if "@" not in name or name.startswith(f"{op}@")
                    },
                }
            ),
        )
        page.wait_for_function("() => window.initialized === true")
        shown.view.wait_for_selector(ready)
        return shown

    yield _show
    for page in pages:
        page.close()
