from __future__ import annotations

from importlib.resources import files

from fastapi import APIRouter
from fastapi.responses import HTMLResponse

router = APIRouter(include_in_schema=False)


@router.get("/", response_class=HTMLResponse)
def dashboard() -> HTMLResponse:
    """The dashboard: one page that renders from the JSON API (backend/api/static/dashboard.html)."""
    return HTMLResponse(files("backend.api").joinpath("static/dashboard.html").read_text())
