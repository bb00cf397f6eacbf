"""Swagger UI at /docs from the `swagger-ui-bundle` package's files, never from a CDN: the API
documentation renders on a machine without internet (FastAPI's default page loads its
JavaScript and CSS from jsdelivr and is blank offline)."""

from __future__ import annotations

from fastapi import FastAPI
from fastapi.openapi.docs import get_swagger_ui_html
from fastapi.responses import HTMLResponse
from fastapi.staticfiles import StaticFiles

STATIC_PREFIX = "/docs-static"


def install(app: FastAPI) -> None:
    from swagger_ui_bundle import swagger_ui_path

    app.mount(STATIC_PREFIX, StaticFiles(directory=swagger_ui_path), name="docs-static")

    @app.get("/docs", include_in_schema=False, response_class=HTMLResponse)
    def swagger_ui() -> HTMLResponse:
        return get_swagger_ui_html(
            openapi_url=app.openapi_url or "/openapi.json", title=f"{app.title}: API",
            swagger_js_url=f"{STATIC_PREFIX}/swagger-ui-bundle.js", swagger_css_url=f"{STATIC_PREFIX}/swagger-ui.css",
            swagger_favicon_url=f"{STATIC_PREFIX}/favicon-32x32.png")
