"""An MCP client on the official Python SDK (`mcp` 2.x) that authorizes on its own, driven by
tests/identity.rs (SC-ID-05).

Usage: py_oauth.py URL MODE TOOL ARGS_JSON
  MODE: "modern" (2026-07-28) or "legacy" (the 2025-11-25 handshake).
The SDK's OAuthClientProvider meets the first 401, reads countersign's protected resource
metadata, discovers the provider, registers itself (dynamic client registration) and runs
authorization code + PKCE with a resource indicator. This script only plays the person at the
provider's login page (following its pages to the redirect) and hands the code back. It prints
one JSON object per line.
"""

import asyncio
import json
import sys
from typing import Any
from urllib.parse import parse_qs, urljoin, urlparse

import httpx2
from mcp import Client
from mcp.client.auth import OAuthClientProvider, TokenStorage
from mcp.client.streamable_http import streamable_http_client
from mcp.shared.auth import (
    AuthorizationCodeResult,
    OAuthClientInformationFull,
    OAuthClientMetadata,
    OAuthToken,
)

REDIRECT = "http://127.0.0.1:1/callback"


def say(**fields: Any) -> None:
    print(json.dumps(fields), flush=True)


class Memory(TokenStorage):
    def __init__(self) -> None:
        self.tokens: OAuthToken | None = None
        self.client: OAuthClientInformationFull | None = None

    async def get_tokens(self) -> OAuthToken | None:
        return self.tokens

    async def set_tokens(self, tokens: OAuthToken) -> None:
        self.tokens = tokens

    async def get_client_info(self) -> OAuthClientInformationFull | None:
        return self.client

    async def set_client_info(self, client_info: OAuthClientInformationFull) -> None:
        self.client = client_info


async def run(url: str, mode: str, tool: str, arguments: dict[str, Any]) -> None:
    landed: dict[str, str] = {}

    async def person_signs_in(authorization_url: str) -> None:
        say(event="authorize", url=authorization_url)
        async with httpx2.AsyncClient(follow_redirects=False, timeout=30) as browser:
            at = authorization_url
            for _ in range(10):
                answer = await browser.get(at)
                at = urljoin(at, answer.headers["location"])
                if at.startswith(REDIRECT):
                    query = parse_qs(urlparse(at).query)
                    landed["code"] = query["code"][0]
                    landed["state"] = query.get("state", [None])[0]
                    # RFC 9207: the provider names itself in the redirect; the SDK checks it.
                    landed["iss"] = query.get("iss", [None])[0]
                    return
        raise RuntimeError("the login page never redirected back")

    async def callback() -> AuthorizationCodeResult:
        return AuthorizationCodeResult(code=landed["code"], state=landed["state"], iss=landed["iss"])

    auth = OAuthClientProvider(
        server_url=url,
        client_metadata=OAuthClientMetadata(
            client_name="countersign identity test",
            redirect_uris=[REDIRECT],
            grant_types=["authorization_code", "refresh_token"],
            response_types=["code"],
            token_endpoint_auth_method="none",
        ),
        storage=Memory(),
        redirect_handler=person_signs_in,
        callback_handler=callback,
    )
    http = httpx2.AsyncClient(auth=auth, timeout=60)
    client = Client(
        streamable_http_client(url, http_client=http),
        mode="legacy" if mode == "legacy" else "auto",
        cache=None,
    )
    async with client:
        say(event="connected", protocol_version=client.session.protocol_version)
        listed = await client.list_tools()
        say(event="tools", names=[t.name for t in listed.tools])
        first = (await client.call_tool(tool, arguments)).model_dump(by_alias=True, mode="json", exclude_none=True)
        action_id = first["structuredContent"]["action_id"]
        say(event="waiting", action_id=action_id, result=first)
        status = (await client.call_tool("countersign_status", {"action_id": action_id})).model_dump(
            by_alias=True, mode="json", exclude_none=True
        )
        say(event="status", result=status)


if __name__ == "__main__":
    asyncio.run(run(sys.argv[1], sys.argv[2], sys.argv[3], json.loads(sys.argv[4])))
