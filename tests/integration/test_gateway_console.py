"""The /search console in a real headless Chromium (Debian's chromium, driven by Playwright):
load the page, paste a key, search the commons and the code, see results, take screenshots."""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest
from playwright.async_api import Page, async_playwright

from tests.integration.support.stacks import gateway_stack, wait_job, wait_searchable

pytestmark = pytest.mark.asyncio(loop_scope="session")

CHROMIUM = "/usr/bin/chromium"
ARGS = [
    "--headless",
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


def _require_chromium() -> None:
    # Not a skip: a console that was never loaded in a browser is an untested console.
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)"
        )


def _git_repo(root: Path) -> Path:
    repo = root / "cfg"
    repo.mkdir(parents=True)
    (repo / "config.py").write_text(
        'class ParseConfig:\n    """Parses the service configuration."""\n\n'
        "    def load(self, path):\n        return open(path).read()\n"
    )
    env = {
        "GIT_AUTHOR_NAME": "t",
        "GIT_AUTHOR_EMAIL": "t@e",
        "GIT_COMMITTER_NAME": "t",
        "GIT_COMMITTER_EMAIL": "t@e",
        "PATH": "/usr/bin:/bin",
    }
    for args in (["init", "-q", "-b", "main"], ["add", "."], ["commit", "-q", "-m", "init"]):
        subprocess.run(["git", *args], cwd=repo, check=True, env=env)
    return repo


async def _use_key(page: Page, key: str) -> None:
    await page.fill("#api-key", key)
    await page.click("#save-key")
    await page.wait_for_function(
        "document.getElementById('key-status').textContent.startsWith('using')"
    )


async def test_console_searches_commons_and_code(
    pg_server_url: str,
    embedder_address: str,
    tmp_path: Path,
) -> None:
    _require_chromium()
    async with gateway_stack(pg_server_url, embedder_address, tmp_path / "stack") as stack:
        key = await stack.key("console-user")
        async with stack.client(key) as rest:
            post = (
                await rest.post(
                    "/v1/posts",
                    json={
                        "title": "Sign-up lives in auth/signup.tsx",
                        "body": "Never add a registration form; extend the sign-up flow instead.",
                        "tags": ["auth"],
                    },
                )
            ).json()
            await wait_searchable(rest, post["id"])
        # Sources are created by an admin (a server path, new names) and granted to the user.
        async with stack.client(stack.admin_key) as admin:
            started = await admin.post(
                "/api/repositories",
                json={
                    "source": str(_git_repo(tmp_path / "src")),
                    "slug": "example.com/acme/cfg",
                    "grant_principal_ids": ["console-user"],
                },
            )
            assert started.status_code == 202, started.text
            assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
            handbook = await admin.post(
                "/api/collections",
                json={
                    "name": "handbook",
                    "documents": [
                        {"path": "deploys.md", "content": "# Deploys\n\nFreeze on Fridays."}
                    ],
                    "grant_principal_ids": ["console-user"],
                },
            )
            assert handbook.status_code == 202, handbook.text
            assert (await wait_job(admin, handbook.json()["job"]["id"]))["state"] == "succeeded"

        async with async_playwright() as pw:
            browser = await pw.chromium.launch(executable_path=CHROMIUM, args=ARGS)
            try:
                page = await browser.new_page(viewport={"width": 1280, "height": 900})
                errors: list[str] = []
                page.on("pageerror", lambda exc: errors.append(str(exc)))
                await page.goto(f"{stack.url}/search")
                assert await page.title() == "Cograph search"
                await _use_key(page, key)
                # The repositories and collections load with the key.
                await page.wait_for_selector(
                    "#code-repo option[value='repo:example.com/acme/cfg']", state="attached"
                )
                await page.wait_for_selector(
                    "#code-repo option[value='collection:handbook']", state="attached"
                )

                await page.click("#tab-commons")
                await page.fill("#commons-query", "add a registration form")
                await page.click("#commons-form button[type=submit]")
                note = page.locator("#commons-results article.note").first
                await note.wait_for()
                assert "Sign-up lives in auth/signup.tsx" in await note.inner_text()
                assert await page.locator("#commons-results mark").count() >= 1
                await note.locator("h3 button").click()
                await page.locator("#commons-post article").wait_for()
                await page.screenshot(path=str(tmp_path / "console-commons.png"), full_page=True)

                await page.click("#tab-code")
                await page.fill("#code-query", "ParseConfig")
                await page.select_option("#code-repo", "repo:example.com/acme/cfg")
                assert await page.is_disabled("#code-layers input[value=md_collection]")
                await page.check("#code-graph")  # graph rendering runs (no page errors)
                await page.click("#code-form button[type=submit]")
                result = page.locator("#code-results article.result").first
                await result.wait_for()
                assert "config.py" in await result.inner_text()
                # The query names it: the first result wears the high-confidence badge.
                assert await result.locator(".where .confidence.high").count() == 1
                assert await page.locator("#code-streams .no-good-answer").count() == 0
                assert await page.locator("#code-results h2.layer").count() >= 1
                assert await page.locator("#code-results table.provenance").count() >= 1
                assert await page.locator("#code-results mark").count() >= 1
                assert await page.locator("#code-results table.stages").count() == 0
                await page.screenshot(path=str(tmp_path / "console-code.png"), full_page=True)

                # Explained: the stages the ranking ran, and each result's path through them.
                await page.check("#code-explain-on")
                await page.click("#code-form button[type=submit]")
                stages = page.locator("#code-explain li")
                await stages.first.wait_for()
                assert "identifier question" in await page.inner_text("#code-explain h2")
                assert "fusion" in await page.inner_text("#code-explain")
                first_stages = page.locator("#code-results article.result table.stages").first
                await first_stages.wait_for()
                assert "fusion" in await first_stages.inner_text()
                assert "[object Object]" not in await page.inner_text("#code-streams")
                await page.uncheck("#code-explain-on")

                # A collection searches its md_collection chunks (the only layer it has).
                await page.uncheck("#code-graph")
                await page.select_option("#code-repo", "collection:handbook")
                assert await page.is_checked("#code-layers input[value=md_collection]")
                assert await page.is_disabled("#code-layers input[value=code]")
                await page.fill("#code-query", "when are deploys frozen")
                await page.click("#code-form button[type=submit]")
                await page.locator("#code-results h2.layer", has_text="md_collection").wait_for()
                chunk = page.locator("#code-results article.result").first
                assert "deploys.md" in await chunk.inner_text()
                assert errors == [], errors
            finally:
                await browser.close()
        assert (tmp_path / "console-commons.png").stat().st_size > 1000
