"""One self-contained HTML document per view: inline CSS and JS, config and data as inert JSON.

Nothing is fetched: the Content-Security-Policy allows no network at all and only the exact inline
script and style of this document (by hash), so even text that slipped through as markup could
not run. Cluster text reaches the page only as JSON and the scripts insert it as text nodes.
"""

from __future__ import annotations

import base64
import hashlib
import html
import json
from functools import cache
from importlib import resources
from typing import Any

from pve_steward import __version__


@cache
def asset(name: str) -> str:
    return resources.files("pve_steward.views").joinpath("assets", name).read_text(encoding="utf-8")


@cache
def compact(name: str) -> str:
    """An asset without indentation, blank lines and whole-line comments: a view stays under 100 KB.

    Safe for our scripts and style: no string or template literal in them spans lines (a test checks).
    """
    js = name.endswith(".js")

    def comment(line: str) -> bool:
        return line.startswith("//") if js else line.startswith("/*") and line.endswith("*/")

    lines = (line.strip() for line in asset(name).splitlines())
    return "\n".join(line for line in lines if line and not comment(line))


def inert_json(value: Any) -> str:
    """JSON safe inside a <script type="application/json"> element (no tag, comment or entity can open)."""
    text = json.dumps(value, separators=(",", ":"), ensure_ascii=False)
    for char, escaped in (
        ("<", "\\u003c"),
        (">", "\\u003e"),
        ("&", "\\u0026"),
        ("\u2028", "\\u2028"),
        ("\u2029", "\\u2029"),
    ):
        text = text.replace(char, escaped)
    return text


def _sha256(text: str) -> str:
    return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode("utf-8")).digest()).decode("ascii") + "'"


def csp(script: str, style: str) -> str:
    return "; ".join(
        (
            "default-src 'none'",
            f"script-src {_sha256(script)}",
            f"style-src {_sha256(style)}",
            "img-src data:",
            "connect-src 'none'",
            "font-src 'none'",
            "frame-src 'none'",
            "object-src 'none'",
            "base-uri 'none'",
            "form-action 'none'",
        )
    )


def build_page(title: str, config: dict[str, Any], data: Any = None, fallback: str | None = None) -> str:
    """The document: ``config`` tells the scripts which view and reads; ``data`` embeds a static report;
    ``fallback`` is markup for a reader without JavaScript, built by us with every text escaped
    (views/report.py ``static_html``)."""
    script = compact("core.js") + "\n" + compact("views.js")
    style = compact("style.css")
    config = {"version": __version__, **config}
    parts = [
        "<!DOCTYPE html>",
        '<html lang="en"><head><meta charset="utf-8">',
        f'<meta http-equiv="Content-Security-Policy" content="{html.escape(csp(script, style), quote=False)}">',
        '<meta name="viewport" content="width=device-width, initial-scale=1">',
        '<meta name="referrer" content="no-referrer">',
        f"<title>{html.escape(title)}</title>",
        f"<style>{style}</style>",
        f'<script type="application/json" id="pvs-config">{inert_json(config)}</script>',
    ]
    if data is not None:
        parts.append(f'<script type="application/json" id="pvs-data">{inert_json(data)}</script>')
    parts += [
        f"<script>{script}</script>",
        '</head><body><main id="app" aria-live="polite"></main>',
    ]
    if fallback is not None:
        parts.append(f"<noscript>{fallback}</noscript>")
    parts.append("</body></html>")
    return "\n".join(parts) + "\n"
