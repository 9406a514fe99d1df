"""An MCP server on the official SDK behind OAuth, with a small authorization server in the
same process (the tests' stand-in, speaking the real wire format): ``python
oauth_mcp_server.py PORT [sse]`` (``sse``: the legacy transport at ``/sse`` instead of
Streamable HTTP at ``/mcp``).

The SDK serves ``/mcp`` (Streamable HTTP, bearer tokens checked by the verifier below, scope
``mcp`` required) and its protected-resource metadata; the routes here are the authorization
server: RFC 8414 metadata, RFC 7591 registration, ``/authorize`` (approves at once: a 302 to
the redirect URI with a code), ``/token`` (authorization_code with PKCE S256, rotating
refresh tokens, client_credentials for the pre-registered client ``svc`` / ``svc-secret``
with HTTP Basic or form auth), and ``/test/stats`` (what was granted, for the assertions).
"""

from __future__ import annotations

import asyncio
import base64
import hashlib
import secrets
import sys
import time
from typing import Any
from urllib.parse import unquote, urlencode

from mcp.server.auth.provider import AccessToken
from mcp.server.auth.settings import AuthSettings
from mcp.server.mcpserver import MCPServer
from starlette.requests import Request
from starlette.responses import JSONResponse, RedirectResponse, Response

PORT = int(sys.argv[1])
TTL = int(sys.argv[2]) if len(sys.argv) > 2 and sys.argv[2].isdigit() else 3600
BASE = f"http://127.0.0.1:{PORT}"
RESOURCE = f"{BASE}/sse" if sys.argv[-1] == "sse" else f"{BASE}/mcp"
clients: dict[str, dict[str, Any]] = {"svc": {"secret": "svc-secret", "redirect_uris": []}}
codes: dict[str, dict[str, Any]] = {}
tokens: dict[str, dict[str, Any]] = {}
refresh_tokens: dict[str, dict[str, Any]] = {}
stats: dict[str, Any] = {"grants": [], "registrations": 0, "refused": []}


class Verifier:
    async def verify_token(self, token: str) -> AccessToken | None:
        info = tokens.get(token)
        if info is None or info["expires_at"] < time.time():
            return None
        return AccessToken(
            token=token,
            client_id=info["client_id"],
            scopes=info["scopes"],
            expires_at=int(info["expires_at"]),
            resource=info["resource"],
        )


server = MCPServer(
    "oauth-test",
    token_verifier=Verifier(),
    auth=AuthSettings(
        issuer_url=BASE,
        resource_server_url=RESOURCE,
        required_scopes=["mcp"],
        validate_token_resource=False,
    ),
)


@server.tool()
def whoami() -> str:
    """Say hello (behind OAuth)."""
    return "hello from behind oauth"


def _error(code: str, status: int = 400) -> JSONResponse:
    stats["refused"].append(code)
    return JSONResponse({"error": code}, status_code=status)


@server.custom_route("/.well-known/oauth-authorization-server", methods=["GET"])
async def metadata(request: Request) -> Response:
    return JSONResponse(
        {
            "issuer": BASE,
            "authorization_endpoint": f"{BASE}/authorize",
            "token_endpoint": f"{BASE}/token",
            "registration_endpoint": f"{BASE}/register",
            "device_authorization_endpoint": f"{BASE}/device",
            "response_types_supported": ["code"],
            "grant_types_supported": ["authorization_code", "refresh_token", "client_credentials"],
            "code_challenge_methods_supported": ["S256"],
            "token_endpoint_auth_methods_supported": [
                "client_secret_basic",
                "client_secret_post",
                "none",
            ],
        }
    )


@server.custom_route("/register", methods=["POST"])
async def register(request: Request) -> Response:
    body = await request.json()
    uris = body.get("redirect_uris") or []
    device = "urn:ietf:params:oauth:grant-type:device_code" in (body.get("grant_types") or [])
    if not (uris or device) or body.get("token_endpoint_auth_method") != "none":
        return _error("invalid_client_metadata")
    client_id = "dyn-" + secrets.token_hex(4)
    clients[client_id] = {"secret": None, "redirect_uris": uris}
    stats["registrations"] += 1
    return JSONResponse(
        {"client_id": client_id, "redirect_uris": uris, "token_endpoint_auth_method": "none"},
        status_code=201,
    )


@server.custom_route("/authorize", methods=["GET"])
async def authorize(request: Request) -> Response:
    q = request.query_params
    client = clients.get(q.get("client_id", ""))
    if client is None or q.get("redirect_uri") not in client["redirect_uris"]:
        return _error("invalid_client")
    if q.get("response_type") != "code" or q.get("code_challenge_method") != "S256":
        return _error("invalid_request")
    code = secrets.token_urlsafe(16)
    codes[code] = {
        "client_id": q["client_id"],
        "challenge": q.get("code_challenge"),
        "redirect_uri": q["redirect_uri"],
        "scope": q.get("scope", ""),
        "resource": q.get("resource"),
    }
    target = q["redirect_uri"] + "?" + urlencode({"code": code, "state": q.get("state", "")})
    return RedirectResponse(target, status_code=302)


def _client_auth(request: Request, form: Any) -> tuple[str, str | None]:
    header = request.headers.get("authorization", "")
    if header.startswith("Basic "):
        cid, _, secret = base64.b64decode(header[6:]).decode().partition(":")
        return unquote(cid), unquote(secret)
    return form.get("client_id", ""), form.get("client_secret")


def _issue(client_id: str, scope: str, resource: str | None) -> dict[str, Any]:
    access, refresh = "at-" + secrets.token_hex(8), "rt-" + secrets.token_hex(8)
    tokens[access] = {
        "client_id": client_id,
        "scopes": scope.split(),
        "resource": resource,
        "expires_at": time.time() + TTL,
    }
    refresh_tokens[refresh] = {"client_id": client_id, "scope": scope, "resource": resource}
    return {
        "access_token": access,
        "token_type": "Bearer",
        "expires_in": TTL,
        "refresh_token": refresh,
        "scope": scope,
    }


@server.custom_route("/token", methods=["POST"])
async def token(request: Request) -> Response:
    form = await request.form()
    grant = form.get("grant_type")
    client_id, secret = _client_auth(request, form)
    client = clients.get(client_id)
    if client is None or (client["secret"] is not None and client["secret"] != secret):
        return _error("invalid_client", 401)
    resource = form.get("resource")
    if resource != RESOURCE:
        return _error("invalid_target")
    if grant == "authorization_code":
        entry = codes.pop(str(form.get("code")), None)  # single use
        verifier = str(form.get("code_verifier", ""))
        digest = base64.urlsafe_b64encode(hashlib.sha256(verifier.encode()).digest())
        if entry is None or entry["client_id"] != client_id:
            return _error("invalid_grant")
        if digest.rstrip(b"=").decode() != entry["challenge"]:
            return _error("invalid_grant")
        if form.get("redirect_uri") != entry["redirect_uri"]:
            return _error("invalid_grant")
        stats["grants"].append("authorization_code")
        return JSONResponse(_issue(client_id, entry["scope"], resource))
    if grant == "refresh_token":
        entry = refresh_tokens.pop(str(form.get("refresh_token")), None)  # rotated: once only
        await asyncio.sleep(0.3)  # a slow server widens the window two refreshers would race in
        if entry is None or entry["client_id"] != client_id:
            return _error("invalid_grant")
        stats["grants"].append("refresh_token")
        return JSONResponse(_issue(client_id, entry["scope"], resource))
    if grant == "urn:ietf:params:oauth:grant-type:device_code":
        entry = devices.get(str(form.get("device_code")))
        if entry is None or entry["client_id"] != client_id:
            return _error("invalid_grant")
        entry["polls"] += 1
        if not entry["approved"] or entry["polls"] == 1:  # the first poll is always pending
            return _error("authorization_pending")
        del devices[str(form.get("device_code"))]
        stats["grants"].append("device_code")
        return JSONResponse(_issue(client_id, entry["scope"], resource))
    if grant == "client_credentials" and client["secret"] is not None:
        stats["grants"].append(
            "client_credentials:" + ("basic" if request.headers.get("authorization") else "post")
        )
        return JSONResponse(_issue(client_id, str(form.get("scope") or "mcp"), resource))
    return _error("unsupported_grant_type")


devices: dict[str, dict[str, Any]] = {}


@server.custom_route("/device", methods=["POST"])
async def device(request: Request) -> Response:
    form = await request.form()
    if str(form.get("client_id")) not in clients:
        return _error("invalid_client", 401)
    code, user = "dc-" + secrets.token_hex(8), secrets.token_hex(3).upper()
    devices[code] = {
        "client_id": form["client_id"],
        "user_code": user,
        "approved": False,
        "polls": 0,
        "scope": str(form.get("scope") or ""),
    }
    return JSONResponse(
        {
            "device_code": code,
            "user_code": user,
            "interval": 1,
            "verification_uri": f"{BASE}/device/verify",
            "expires_in": 60,
        }
    )


@server.custom_route("/device/verify", methods=["POST"])
async def device_verify(request: Request) -> Response:
    """The person enters the user code (the test stands in for them)."""
    user = (await request.form()).get("user_code")
    for entry in devices.values():
        if entry["user_code"] == user:
            entry["approved"] = True
            return JSONResponse({"ok": True})
    return _error("invalid_user_code", 404)


@server.custom_route("/test/stats", methods=["GET"])
async def test_stats(request: Request) -> Response:
    return JSONResponse(stats)


@server.custom_route("/test/expire", methods=["POST"])
async def test_expire(request: Request) -> Response:
    for info in tokens.values():
        info["expires_at"] = 0
    return JSONResponse({"expired": len(tokens)})


if __name__ == "__main__":
    if sys.argv[-1] == "sse":  # the legacy transport at /sse, behind the same OAuth
        server.run("sse", host="127.0.0.1", port=PORT)
    else:
        server.run("streamable-http", host="127.0.0.1", port=PORT)
