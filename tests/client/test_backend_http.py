"""client.backend_http: every party's one mapping of the backend's failures, transient (try again
later) apart from refused (a bug or a misconfiguration), with the status and a bounded message."""

from __future__ import annotations

import httpx
import pytest

from client.backend_http import DETAIL_CHARS, ApiError, BackendHttp, BackendRefused, BackendUnavailable


def backend(status: int, body: object = None, text: str | None = None) -> BackendHttp:
    def answer(request: httpx.Request) -> httpx.Response:
        if text is not None:
            return httpx.Response(status, text=text)
        return httpx.Response(status, json=body if body is not None else {"detail": f"answered {status}"})

    return BackendHttp(httpx.Client(base_url="http://backend.test", transport=httpx.MockTransport(answer)))


@pytest.mark.parametrize("status", [404, 409, 429, 500, 503, 401])
def test_statuses_worth_retrying_are_unavailable(status: int) -> None:
    with pytest.raises(BackendUnavailable, match=f"job 3 result: HTTP {status}: answered {status}") as caught:
        backend(status).request("GET", "/jobs/3/result", what="job 3 result")
    assert (caught.value.status, caught.value.detail) == (status, f"answered {status}")


@pytest.mark.parametrize("status", [400, 403, 413, 422])
def test_other_failures_are_refused(status: int) -> None:
    with pytest.raises(BackendRefused, match=f"PUT /jobs/3/outputs/0: HTTP {status}"):
        backend(status).request("PUT", "/jobs/3/outputs/0")


def test_a_success_is_the_response() -> None:
    assert backend(200, {"ok": True}).request("GET", "/health").json() == {"ok": True}


def test_the_message_is_the_detail_else_the_text_and_bounded() -> None:
    with pytest.raises(ApiError) as caught:
        backend(422, {"detail": [{"loc": ["body"], "msg": "field required"}]}).request("POST", "/quotes")
    assert "field required" in caught.value.detail
    with pytest.raises(ApiError) as caught:
        backend(502, text="<html>bad gateway</html>").request("GET", "/jobs")
    assert caught.value.detail == "<html>bad gateway</html>"
    with pytest.raises(ApiError) as caught:
        backend(500, text="x" * (10 * DETAIL_CHARS)).request("GET", "/jobs")
    assert len(caught.value.detail) == DETAIL_CHARS


def test_no_answer_is_unavailable_without_a_status() -> None:
    def refuse(request: httpx.Request) -> httpx.Response:
        raise httpx.ConnectError("connection refused", request=request)

    http = BackendHttp(httpx.Client(base_url="http://backend.test", transport=httpx.MockTransport(refuse)))
    with pytest.raises(BackendUnavailable, match="GET /jobs: connection refused") as caught:
        http.request("GET", "/jobs")
    assert caught.value.status is None
    assert isinstance(caught.value.__cause__, httpx.ConnectError)  # the CLI's boundary names the URL from it


def test_a_signed_request_without_a_key_is_refused_before_anything_is_sent() -> None:
    sent: list[httpx.Request] = []
    http = BackendHttp(httpx.Client(base_url="http://backend.test",
                                    transport=httpx.MockTransport(lambda r: sent.append(r) or httpx.Response(200))))
    with pytest.raises(BackendRefused, match="no key to sign in with"):
        http.request("POST", "/models", signed=True)
    assert sent == []
