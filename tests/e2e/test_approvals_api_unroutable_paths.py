"""Every path under the staff API answers JSON, whatever the method: one that routes nowhere is a
JSON 404, never Django's HTML pages (its 404, or the 403 "CSRF verification failed" of a POST)."""

from __future__ import annotations

import pytest


@pytest.mark.parametrize("method", ["GET", "POST", "PUT", "PATCH", "DELETE"])
@pytest.mark.parametrize(
    "path", ["/api/admin/approvals/..%2F..%2Fetc", "/api/admin/approvals/a/b", "/api/admin/nothing-here"]
)
def test_a_path_under_the_staff_api_that_routes_nowhere_is_a_json_404(admin_api, live_server, method, path):
    response = admin_api.http.request(method, f"{live_server.url}{path}", json={"approved": True})

    assert response.status_code == 404, response.text
    assert response.headers["Content-Type"] == "application/json"
    assert response.json() == {"detail": "Not found."}
