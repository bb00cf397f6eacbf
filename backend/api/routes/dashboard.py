from __future__ import annotations

from importlib.resources import files
from importlib.resources.abc import Traversable
from typing import Annotated

from fastapi import APIRouter, Path
from fastapi.responses import HTMLResponse, Response

from backend.errors import NotFound

router = APIRouter(include_in_schema=False)
STATIC = files("backend.api").joinpath("static")
MEDIA_TYPES = {"js": "text/javascript; charset=utf-8", "css": "text/css; charset=utf-8"}


@router.get("/", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    """The dashboard: one page that renders from the JSON API (backend/api/static/dashboard.html)."""
    return HTMLResponse(STATIC.joinpath("dashboard.html").read_text())


@router.get("/static/{name}", response_class=Response)
def static(name: Annotated[str, Path(pattern=r"^[a-z]+\.(js|css)$")]) -> Response:
    """The page's scripts (plain files, no build step). The name pattern keeps paths inside
    the static folder."""
    return _serve(STATIC.joinpath(name), name)


@router.get("/static/{package}/{name}", response_class=Response)
def vendored(package: Annotated[str, Path(pattern=r"^(noble-hashes|fflate)$")],
             name: Annotated[str, Path(pattern=r"^_?[a-zA-Z0-9]+\.js$")]) -> Response:
    """The ES modules of the pinned npm packages the page imports (@noble/hashes for keccak.js,
    fflate for zip.js), vendored: see each folder's README. The patterns keep paths inside them."""
    return _serve(STATIC.joinpath(package, name), name)


def _serve(resource: Traversable, name: str) -> Response:
    if not resource.is_file():
        raise NotFound("static file", name)
    return Response(resource.read_text(), media_type=MEDIA_TYPES[name.rsplit(".", 1)[1]],
                    headers={"Cache-Control": "no-cache"})
