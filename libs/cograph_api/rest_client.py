"""A client of the gateway's REST API: what `cograph mcp` (stdio) and `cograph keys` use.

Configuration: COGRAPH_GATEWAY_URL (default http://127.0.0.1:8080) and the key from
COGRAPH_API_KEY, else from $COGRAPH_DATA_DIR/admin.key (written by the first `cograph up`).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any
from urllib.parse import quote

import httpx

from cograph_api import rest_models as models
from cograph_api.admin_keys import ADMIN_KEY_FILE
from cograph_api.operations import Json
from cograph_api.rest_errors import ApiError
from svckit.config import Env, data_dir

DEFAULT_URL = "http://127.0.0.1:8080"


@dataclass(frozen=True)
class ClientConfig:
    url: str
    key: str | None
    key_source: str  # where the key came from, for error messages

    @classmethod
    def from_env(cls, environ: Mapping[str, str]) -> ClientConfig:
        env = Env(environ)
        url = env.str("COGRAPH_GATEWAY_URL", DEFAULT_URL).rstrip("/")
        key = env.optional_str("COGRAPH_API_KEY")
        if key:
            return cls(url, key.strip(), "COGRAPH_API_KEY")
        path: Path = data_dir(env) / ADMIN_KEY_FILE
        try:
            return cls(url, path.read_text().strip() or None, str(path))
        except OSError:
            return cls(url, None, "nowhere (set COGRAPH_API_KEY)")


class RestClient:
    """CographApi over HTTP, plus the key administration calls."""

    def __init__(self, config: ClientConfig, *, timeout_s: float = 60.0) -> None:
        headers = {"Authorization": f"Bearer {config.key}"} if config.key else {}
        self._http = httpx.AsyncClient(base_url=config.url, headers=headers, timeout=timeout_s)

    async def close(self) -> None:
        await self._http.aclose()

    async def _request(self, method: str, path: str, **kwargs: Any) -> Any:
        try:
            reply = await self._http.request(method, path, **kwargs)
        except httpx.HTTPError as err:
            raise ApiError(503, "unavailable", f"cannot reach the gateway: {err}") from None
        if reply.status_code == 204:
            return None
        try:
            body = reply.json()
        except ValueError:
            body = None
        if reply.is_error:
            if isinstance(body, dict) and "error" in body:
                raise ApiError(reply.status_code, str(body["error"]), str(body.get("detail", "")))
            raise ApiError(reply.status_code, "http_error", reply.text[:200])
        return body

    # ---- CographApi ----

    async def search(self, request: models.SearchRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/search", json=body)
        return result

    async def route(self, request: models.RouteRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/route", json=body)
        return result

    async def graph(self, request: models.GraphRequest) -> Json:
        result: Json = await self._request("POST", "/api/graph", json=request.model_dump())
        return result

    async def read(self, request: models.ReadRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/read", json=body)
        return result

    async def list_files(self, request: models.FilesRequest) -> Json:
        params = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("GET", "/api/files", params=params)
        return result

    async def grep(self, request: models.GrepRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/grep", json=body)
        return result

    async def references(self, request: models.ReferencesRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/references", json=body)
        return result

    async def index_repository(self, request: models.IndexRepositoryRequest) -> Json:
        body = request.model_dump(mode="json", exclude_none=True)
        result: Json = await self._request("POST", "/api/repositories", json=body)
        return result

    async def get_job(self, job_id: str) -> Json:
        result: Json = await self._request("GET", f"/api/jobs/{quote(job_id, safe='')}")
        return result

    async def create_comment(self, post_id: str, request: models.NewComment) -> Json:
        path = f"/v1/posts/{quote(post_id, safe='')}/comments"
        result: Json = await self._request("POST", path, json=request.model_dump())
        return result

    async def list_repositories(self) -> Json:
        result: Json = await self._request("GET", "/api/repositories")
        return result

    async def get_repository(self, slug: str) -> Json:
        result: Json = await self._request("GET", f"/api/repositories/{quote(slug)}")
        return result

    async def list_collections(self) -> Json:
        result: Json = await self._request("GET", "/api/collections")
        return result

    async def list_refs(self, slug: str, remote: bool = False) -> Json:
        params = {"remote": "true"} if remote else None
        result: Json = await self._request(
            "GET", f"/api/repositories/{quote(slug)}/refs", params=params
        )
        return result

    async def index_ref(self, slug: str, request: models.IndexRefRequest) -> Json:
        result: Json = await self._request(
            "POST", f"/api/repositories/{quote(slug)}/refs", json=request.model_dump(mode="json")
        )
        return result

    async def delete_ref(self, slug: str, ref: str) -> None:
        await self._request("DELETE", f"/api/repositories/{quote(slug)}/refs", params={"ref": ref})

    async def delete_repository(self, slug: str) -> None:
        await self._request("DELETE", f"/api/repositories/{quote(slug)}")

    async def delete_collection(self, name: str) -> None:
        await self._request("DELETE", f"/api/collections/{quote(name, safe='')}")

    async def outline(self, repo: str, path: str, ref: str = "") -> Json:
        params = {"repo": repo, "path": path, **({"ref": ref} if ref else {})}
        result: Json = await self._request("GET", "/api/outline", params=params)
        return result

    async def search_posts(self, request: models.PostSearchRequest) -> Json:
        scope = request.model_dump(exclude_none=True, exclude={"query"})
        result: Json = await self._request(
            "GET", "/v1/search", params={"q": request.query, **scope}
        )
        return result

    async def list_posts(self, request: models.PostListRequest) -> Json:
        params = request.model_dump(exclude_none=True)
        result: Json = await self._request("GET", "/v1/posts", params=params)
        return result

    async def get_post(self, post_id: str) -> Json:
        result: Json = await self._request("GET", f"/v1/posts/{quote(post_id, safe='')}")
        return result

    async def list_comments(self, post_id: str) -> Json:
        path = f"/v1/posts/{quote(post_id, safe='')}/comments"
        result: Json = await self._request("GET", path)
        return result

    async def create_post(self, request: models.NewPost) -> Json:
        body = request.model_dump(exclude_none=True)
        result: Json = await self._request("POST", "/v1/posts", json=body)
        return result

    async def list_anchors(self, request: models.AnchorListRequest) -> Json:
        params = request.model_dump(exclude_none=True)
        result: Json = await self._request("GET", "/v1/anchors", params=params)
        return result

    async def add_anchors(self, post_id: str, request: models.NewAnchors) -> Json:
        path = f"/v1/posts/{quote(post_id, safe='')}/anchors"
        result: Json = await self._request("POST", path, json=request.model_dump(exclude_none=True))
        return result

    async def confirm_anchor(self, post_id: str, anchor_id: str) -> Json:
        path = f"/v1/posts/{quote(post_id, safe='')}/anchors/{quote(anchor_id, safe='')}/confirm"
        result: Json = await self._request("POST", path)
        return result

    async def vote(self, post_id: str, request: models.Vote) -> Json:
        path = f"/v1/posts/{quote(post_id, safe='')}/votes"
        result: Json = await self._request("POST", path, json=request.model_dump())
        return result

    # ---- keys ----

    async def create_key(self, request: models.NewKey) -> Json:
        body = request.model_dump(exclude_none=True)
        result: Json = await self._request("POST", "/api/keys", json=body)
        return result

    async def list_keys(self) -> Json:
        result: Json = await self._request("GET", "/api/keys")
        return result

    async def revoke_key(self, key_id: str) -> None:
        await self._request("DELETE", f"/api/keys/{quote(key_id, safe='')}")

    # ---- access ----

    async def grant(self, request: models.AccessGrant) -> Json:
        body = request.model_dump(exclude_none=True)
        result: Json = await self._request("POST", "/api/access/grant", json=body)
        return result

    async def revoke(self, request: models.AccessGrant) -> Json:
        body = request.model_dump(exclude_none=True)
        result: Json = await self._request("POST", "/api/access/revoke", json=body)
        return result

    async def set_visibility(self, request: models.Visibility) -> Json:
        body = request.model_dump(exclude_none=True)
        result: Json = await self._request("POST", "/api/access/visibility", json=body)
        return result
