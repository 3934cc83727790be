"""The /search console in a real headless Chromium (Debian's chromium, driven by Playwright)
over one real stack: the key checked, code results in ranked order with whole-word marks,
the file view (highlighted, scrolled to the range, its outline), references and the graph
as links, explain per result, the empty, low-confidence and error states, and the commons
(search, post, vote, comment, the recent notes, a note's anchors and their confirmation).
Each state checked is also saved as a screenshot, under
`$COGRAPH_TEST_ARTIFACTS/console/<test>/` when that is set (a folder to keep, say as a CI
job's artifacts), else in the test's tmp_path; each file is checked to be a PNG of the
whole viewport."""

from __future__ import annotations

import os
import re
import shutil
import struct
import subprocess
from collections.abc import AsyncIterator
from dataclasses import dataclass
from pathlib import Path

import pytest
import pytest_asyncio
from playwright.async_api import Browser, Page, ViewportSize, async_playwright

from tests.integration.support.git_repos import JAN, commit_all, write
from tests.integration.support.stacks import Stack, gateway_stack, wait_job, wait_searchable

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
VIEWPORT = ViewportSize(width=1280, height=900)
PNG_SIGNATURE = b"\x89PNG\r\n\x1a\n"
SLUG = "example.com/acme/cfg"
# ParseConfig starts past a screenful of lines, so the file view must scroll to it.
PADDING = 240
CLASS_LINE = PADDING + 1
LOAD_LINE = PADDING + 4
HOSTILE = (
    'PAGE = "<script>window.pwned = 1</script>"\n'
    "BADGE = '<img src=x onerror=\"window.pwned = 2\">'\n"
)


def _require_chromium() -> None:
    # Not a skip: a console that was never loaded in a browser is an untested console.
    if not Path(CHROMIUM).exists() and not shutil.which("chromium"):
        pytest.fail(
            f"{CHROMIUM} is missing: install Debian's chromium (apt-get install -y chromium)"
        )


def _git_repo(root: Path) -> Path:
    repo = root / "cfg"
    repo.mkdir(parents=True)
    padding = "".join(f"SETTING_{i} = {i}\n" for i in range(PADDING))
    (repo / "config.py").write_text(
        padding + 'class ParseConfig:\n    """Parses the service configuration."""\n\n'
        "    def load(self, path):\n        return open(path).read()\n"
    )
    (repo / "main.py").write_text(
        "from config import ParseConfig\n\n\ndef run(path):\n    return ParseConfig().load(path)\n"
    )
    (repo / "templates.py").write_text(HOSTILE)
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


@dataclass
class Console:
    stack: Stack
    browser: Browser
    key: str
    other_note: str  # a note by someone else, for voting and commenting
    source: Path  # the indexed repository's git working tree


@pytest_asyncio.fixture(scope="module", loop_scope="session")
async def console(
    pg_server_url: str, embedder_address: str, tmp_path_factory: pytest.TempPathFactory
) -> AsyncIterator[Console]:
    _require_chromium()
    tmp = tmp_path_factory.mktemp("console")
    async with gateway_stack(pg_server_url, embedder_address, tmp / "stack") as stack:
        key = await stack.key("console-user")
        async with stack.client(await stack.key("colleague")) as rest:
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
        source = _git_repo(tmp / "src")
        async with stack.client(stack.admin_key) as admin:
            started = await admin.post(
                "/api/repositories",
                json={
                    "source": str(source),
                    "slug": SLUG,
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
                yield Console(stack, browser, key, post["id"], source)
            finally:
                await browser.close()


@dataclass
class Opened:
    page: Page
    errors: list[str]


async def _open(console: Console, key: str | None = None) -> Opened:
    page = await console.browser.new_page(viewport=VIEWPORT)
    errors: list[str] = []
    page.on("pageerror", lambda exc: errors.append(str(exc)))
    # A Content-Security-Policy refusal is a console message, not a page error.
    page.on(
        "console",
        lambda msg: errors.append(msg.text) if "Content Security Policy" in msg.text else None,
    )
    await page.goto(f"{console.stack.url}/search")
    if key is not None:
        await page.fill("#api-key", key)
        await page.click("#save-key")
        await page.locator("#key-status.ok").wait_for()
        await page.wait_for_selector(f"#code-repo option[value='repo:{SLUG}']", state="attached")
    return Opened(page, errors)


@dataclass
class Screenshots:
    """Where a test saves a screenshot of each state it checks."""

    directory: Path
    taken: list[Path]

    async def take(self, page: Page, state: str) -> Path:
        """The viewport as `<state>.png`, checked to be a PNG of the viewport's size (a
        blank or failed capture would still leave a file). Not the full page: a long file
        view would make it several times slower."""
        path = self.directory / f"{state}.png"
        await page.screenshot(path=str(path))
        data = path.read_bytes()
        assert data.startswith(PNG_SIGNATURE), f"{path}: not a PNG"
        # The first chunk is IHDR: its width and height, big-endian, after length and type.
        assert data[12:16] == b"IHDR", f"{path}: no IHDR"
        assert struct.unpack(">II", data[16:24]) == (VIEWPORT["width"], VIEWPORT["height"])
        assert len(data) > 2000, f"{path}: {len(data)} bytes, an empty page"
        self.taken.append(path)
        return path


@pytest.fixture
def shots(request: pytest.FixtureRequest, tmp_path: Path) -> Screenshots:
    root = os.environ.get("COGRAPH_TEST_ARTIFACTS")
    directory = Path(root) / "console" / request.node.name if root else tmp_path
    directory.mkdir(parents=True, exist_ok=True)
    return Screenshots(directory, [])


async def _search(page: Page, query: str, source: str = f"repo:{SLUG}") -> None:
    await page.fill("#code-query", query)
    await page.select_option("#code-repo", source)
    await page.click("#code-form button[type=submit]")
    # A function, not an expression: the page's CSP refuses eval, which Playwright would use.
    await page.wait_for_function(
        "() => document.getElementById('code-state').textContent !== 'searching…'"
    )


async def test_the_console_read_is_the_api_read_for_the_callers_key(console: Console) -> None:
    async with console.stack.client() as anonymous:
        page = await anonymous.get("/search")
        assert "script-src 'self';" in page.headers["content-security-policy"]
        css = await anonymous.get("/search/highlight.css")
        assert css.status_code == 200 and css.headers["content-type"].startswith("text/css")
        assert ".code .k {" in css.text
        refused = await anonymous.post(
            "/console/api/read", json={"repo": SLUG, "path": "config.py"}
        )
        assert refused.status_code == 401, refused.text
    async with console.stack.client(console.key) as rest:
        read = await rest.post(
            "/console/api/read", json={"repo": SLUG, "path": "config.py", "start_line": 241}
        )
        assert read.status_code == 200, read.text
        answer = read.json()
        plain = (
            await rest.post(
                "/api/read", json={"repo": SLUG, "path": "config.py", "start_line": 241}
            )
        ).json()
        assert {k: v for k, v in answer.items() if k != "highlight"} == plain
        assert answer["highlight"]["lexer"] == "Python"
        assert answer["highlight"]["lines"][0][0] == ["k", "class"]
        for body, status, words in [
            ({"repo": "example.com/nope/x", "path": "config.py"}, 404, "not_found"),
            ({"repo": SLUG, "collection": "handbook", "path": "a"}, 400, "exactly one of repo"),
            ({"repo": SLUG, "path": "config.py", "start_line": 0}, 400, "start_line"),
            ({"repo": SLUG, "path": "../etc/passwd"}, 400, "path"),
        ]:
            refused = await rest.post("/console/api/read", json=body)
            assert refused.status_code == status and words in refused.text, refused.text
    async with console.stack.client(await console.stack.key("outsider")) as rest:
        # A repository the key may not read is not found, as on /api/read.
        hidden = await rest.post("/console/api/read", json={"repo": SLUG, "path": "config.py"})
        assert hidden.status_code == 404, hidden.text


async def test_the_key_is_checked_when_entered(console: Console) -> None:
    opened = await _open(console)
    page = opened.page
    assert await page.title() == "Cograph search"
    await page.fill("#api-key", "cg_not-a-key")
    await page.click("#save-key")
    status = page.locator("#key-status.bad")
    await status.wait_for()
    assert "invalid key" in await status.inner_text()
    assert await page.evaluate("localStorage.getItem('cograph.apiKey')") is None
    # A valid key is kept and loads the sources it may read.
    await page.fill("#api-key", console.key)
    await page.click("#save-key")
    await page.wait_for_selector(f"#code-repo option[value='repo:{SLUG}']", state="attached")
    assert (await page.inner_text("#key-status")).startswith("using")
    # A saved key that stops working says so on the next visit.
    await page.evaluate("localStorage.setItem('cograph.apiKey', 'cg_revoked')")
    await page.reload()
    await page.locator("#key-status.bad").wait_for()
    assert opened.errors == [], opened.errors
    await page.close()


async def test_results_in_ranked_order_with_whole_word_marks_and_graph_links(
    console: Console, shots: Screenshots
) -> None:
    opened = await _open(console, console.key)
    page = opened.page
    # The graph is expanded in one repository: it cannot be asked for over all of them.
    assert await page.is_disabled("#code-graph")
    await page.select_option("#code-repo", f"repo:{SLUG}")
    assert await page.is_enabled("#code-graph")
    await page.check("#code-graph")
    await page.select_option("#code-repo", "")
    assert await page.is_disabled("#code-graph") and not await page.is_checked("#code-graph")
    await page.select_option("#code-repo", f"repo:{SLUG}")
    await page.check("#code-graph")

    await _search(page, "ParseConfig")
    shown = await page.eval_on_selector_all(
        "#code-results li.result",
        "items => items.map(i => [i.dataset.rank, i.dataset.id, "
        "i.querySelector('.layer-label').textContent])",
    )
    async with console.stack.client(console.key) as rest:
        answer = (
            await rest.post(
                "/api/search",
                json={
                    "query": "ParseConfig",
                    "repo": SLUG,
                    "layers": ["code", "ast_summary", "repo_doc"],
                    "top_k": 10,
                    "snippet_chars": 600,
                    "include_graph": True,
                    "verbose": True,
                },
            )
        ).json()
    # The answer's order, numbered, each with its layer as a label (not regrouped by layer).
    assert shown == [[str(i + 1), r["id"], r["layer"]] for i, r in enumerate(answer["results"])]
    assert len({layer for _, _, layer in shown}) > 1  # several layers, still interleaved
    first = page.locator("#code-results li.result").first
    assert "config.py" in await first.locator("a.where").inner_text()
    assert await first.locator(".confidence.high").count() == 1
    assert await page.locator("#code-state").is_hidden()
    streams = await page.inner_text("#code-streams")
    assert "lexical: ok" in streams and "[object Object]" not in streams
    # An unavailable stream says why, beside its name (reasons is no stream of its own).
    degraded = await page.evaluate(
        """() => {
            const bar = document.getElementById('code-streams');
            const shown = bar.textContent;
            bar.replaceChildren();
            renderStreams({vector: 'unavailable', lexical: 'ok', symbol: 'ok',
                           reasons: {vector: 'embedder_unavailable'}});
            const text = [...bar.children].map(s => s.textContent);
            bar.textContent = shown;
            return text;
        }"""
    )
    assert degraded == ["vector: unavailable (embedder_unavailable)", "lexical: ok", "symbol: ok"]
    # Whole words and identifier parts, never a term inside a word.
    marks = await page.evaluate(
        """() => {
            const marked = (text, query) => [...(() => {
                const box = document.createElement('div');
                box.append(highlighted(text, queryTerms(query)));
                return box.querySelectorAll('mark');
            })()].map(m => m.textContent);
            return [marked('This his', 'his'),
                    marked('ParseConfig parse_config reparse configs', 'ParseConfig'),
                    marked('what is it', 'what is')];
        }"""
    )
    assert marks == [["his"], ["ParseConfig", "parse", "config"], []]
    assert "ParseConfig" in await page.locator("#code-results mark").all_inner_texts()
    # The graph is a list of links into the files.
    node = page.locator("#code-graph-view ul.nodes a[href^='#file']").first
    await node.wait_for()
    await shots.take(page, "results")
    # Every end of an edge is named, the results' too (no bare chunk ids).
    assert not re.search(r"\bcode:\d", await page.inner_text("#code-graph-view"))
    await node.click()
    await page.locator("#panel-file .line.hll").first.wait_for()
    await page.go_back()
    assert await page.locator("#panel-code").is_visible()
    assert await page.locator("#code-results li.result").count() == len(shown)
    assert opened.errors == [], opened.errors
    await page.close()


async def test_file_view_outline_references_and_hostile_content(
    console: Console, shots: Screenshots
) -> None:
    opened = await _open(console, console.key)
    page = opened.page
    await _search(page, "ParseConfig")
    first = page.locator("#code-results li.result").first
    where = await first.locator("a.where").inner_text()
    assert where.startswith(f"{SLUG}/config.py:{CLASS_LINE}-")
    await first.locator("a.where").click()
    code = page.locator("#file-code")
    await page.locator(f"#L{CLASS_LINE}.hll").wait_for()
    assert (await page.inner_text("#file-title")) == f"{SLUG}/config.py"
    assert "Python" in await page.inner_text("#file-meta")
    # Highlighted by Pygments' classes, coloured by its stylesheet served with the page.
    keyword = page.locator(f"#L{CLASS_LINE} .src span.k")
    assert await keyword.inner_text() == "class"
    assert await keyword.evaluate("k => getComputedStyle(k).fontWeight") == "700"
    # Scrolled to the range: its first line is inside the code view's visible part.
    assert await code.evaluate("c => c.scrollTop") > 0
    assert await page.evaluate(
        f"""() => {{
            const line = document.getElementById('L{CLASS_LINE}').getBoundingClientRect();
            const view = document.getElementById('file-code').getBoundingClientRect();
            return line.top >= view.top && line.bottom <= view.bottom;
        }}"""
    )
    await shots.take(page, "file-view")
    # The outline: a symbol's link marks its lines.
    load = page.locator("#file-outline a", has_text="load").first
    await load.wait_for()
    assert "ParseConfig" in await page.inner_text("#file-outline")
    await load.click()
    await page.locator(f"#L{LOAD_LINE}.hll").wait_for()
    assert await page.locator(f"#L{CLASS_LINE}.hll").count() == 0

    # References: from the outline to the list, and from the list to the using line.
    await page.locator("#file-outline a.references").first.click()
    use = page.locator("#refs-list ul.uses a", has_text="main.py")
    await use.first.wait_for()
    assert "config.py" in await page.inner_text("#refs-list ul.definitions")
    await shots.take(page, "references")
    await use.first.click()
    await page.locator("#panel-file .line.hll").first.wait_for()
    assert (await page.inner_text("#file-title")) == f"{SLUG}/main.py"
    assert "ParseConfig" in await page.locator("#panel-file .line.hll").first.inner_text()

    # A file's markup is shown as text: nothing is created from it and nothing runs.
    await page.evaluate(f"location.hash = '#file?repo={SLUG}&path=templates.py&start=1&end=2'")
    await page.locator("#L2.hll").wait_for()
    assert "<script>window.pwned = 1</script>" in await code.inner_text()
    assert '<img src=x onerror="window.pwned = 2">' in await code.inner_text()
    assert await page.locator("#file-code script, #file-code img").count() == 0
    assert await page.evaluate("window.pwned") is None

    # A file outside the index: the error, and nothing left of the previous file.
    await page.evaluate(f"location.hash = '#file?repo={SLUG}&path=missing.py&start=1'")
    await page.locator("#file-error").wait_for()
    assert "not_found" in await page.inner_text("#file-error")
    assert await page.locator("#file-code .line").count() == 0
    await shots.take(page, "file-error")
    assert opened.errors == [], opened.errors
    await page.close()


async def test_explain_per_result_and_the_empty_low_and_error_states(
    console: Console, shots: Screenshots
) -> None:
    opened = await _open(console, console.key)
    page = opened.page
    await _search(page, "ParseConfig")
    second = page.locator("#code-results li.result").nth(1)
    await second.locator("button.explain").click()
    view = second.locator(".explain-view")
    await view.locator("table.stages").wait_for()
    assert "identifier question" in await view.inner_text()
    assert "fusion" in await view.locator("table.stages").inner_text()
    assert await view.locator("table.provenance").count() == 1
    # Asked for one result only.
    assert await page.locator("#code-results .explain-view:not([hidden])").count() == 1
    await second.scroll_into_view_if_needed()
    await shots.take(page, "explain")

    # Low confidence: results, and the state saying none is a good answer.
    await _search(page, "zzqqxx nothing here")
    assert await page.locator("#code-results li.result").count() > 0
    assert "No good answer" in await page.inner_text("#code-state.low")
    assert await page.locator("#code-results .explain-view:not([hidden])").count() == 0
    await shots.take(page, "low-confidence")

    # An error replaces everything the previous search showed, and stays in its tab.
    await page.fill("#code-since", "2030-01-02T00:00")
    await page.fill("#code-until", "2030-01-01T00:00")
    await _search(page, "ParseConfig")
    assert "since must not be after until" in await page.inner_text("#code-error")
    assert await page.locator("#code-results li").count() == 0
    assert await page.inner_text("#code-streams") == ""
    assert await page.locator("#code-state").is_hidden()
    await shots.take(page, "error")
    await page.click("#tab-commons")
    assert await page.locator("#commons-error").is_hidden()
    await page.click("#tab-code")

    # Empty: nothing was indexed after the year 2100.
    await page.fill("#code-until", "")
    await page.fill("#code-since", "2100-01-01T00:00")
    await _search(page, "ParseConfig")
    assert await page.locator("#code-error").is_hidden()
    assert "No results" in await page.inner_text("#code-state.empty")
    assert await page.locator("#code-results li").count() == 0
    await shots.take(page, "empty")

    # A collection searches its md_collection chunks (the only layer it has).
    await page.fill("#code-since", "")
    await page.select_option("#code-repo", "collection:handbook")
    assert await page.is_checked("#code-layers input[value=md_collection]")
    assert await page.is_disabled("#code-layers input[value=code]")
    await _search(page, "when are deploys frozen", "collection:handbook")
    chunk = page.locator("#code-results li.result").first
    assert "handbook/deploys.md" in await chunk.locator("a.where").inner_text()
    assert await chunk.locator(".layer-label").inner_text() == "md_collection"
    # A collection document opens in the file view too (without an outline).
    await chunk.locator("a.where").click()
    await page.locator("#panel-file .line.hll").first.wait_for()
    assert "Freeze on Fridays." in await page.inner_text("#file-code")
    assert "no outline" in await page.inner_text("#file-outline")
    assert opened.errors == [], opened.errors
    await page.close()


async def test_commons_search_post_vote_and_comment(console: Console, shots: Screenshots) -> None:
    opened = await _open(console, console.key)
    page = opened.page
    await page.click("#tab-commons")
    assert "Search the notes" in await page.inner_text("#commons-state")

    # Posting: the note is shown, and its author (this key) is marked as such.
    await page.click("#commons-new summary")
    await page.fill("#post-title", "Config files load through ParseConfig")
    await page.fill("#post-body", "Call ParseConfig().load(path); never open() config files.")
    await page.fill("#post-tags", "config, python")
    await page.click("#post-form button[type=submit]")
    mine = page.locator("#note-view")
    await mine.wait_for()
    assert "Config files load through ParseConfig" in await mine.inner_text()
    assert "(you)" in await mine.locator(".meta .author").inner_text()
    assert await mine.locator(".tag").all_inner_texts() == ["config", "python"]
    await shots.take(page, "commons-post")
    # An author cannot vote on their own note: the refusal is shown.
    await mine.locator("button.vote-up").click()
    await page.locator("#commons-error").wait_for()
    assert await mine.locator(".score").inner_text() == "0"

    # Someone else's note, found by meaning, with the query's whole words marked.
    await page.fill("#commons-query", "add a registration form")
    await page.click("#commons-form button[type=submit]")
    # The tab opened on the recent notes: wait for the search's own list (its marks), not
    # the list it replaces.
    await page.locator("#commons-results mark").first.wait_for()
    found = page.locator("#commons-results article.note").first
    assert await page.locator("#commons-error").is_hidden()
    assert "Sign-up lives in auth/signup.tsx" in await found.inner_text()
    assert "registration" in await page.locator("#commons-results mark").all_inner_texts()
    assert "contributor" in await found.locator(".author").inner_text()
    await shots.take(page, "commons-search")
    await found.locator("h3 button").click()
    note = page.locator(f"#note-view[data-id='{console.other_note}']")
    await note.wait_for()
    assert "(you)" not in await note.locator(".meta .author").inner_text()
    await note.locator("button.vote-up").click()
    await note.locator("button.vote-up[aria-pressed=true]").wait_for()
    assert await note.locator(".score").inner_text() == "1"
    await shots.take(page, "commons-vote")
    # Pressing it again withdraws the vote.
    await note.locator("button.vote-up").click()
    await note.locator("button.vote-up[aria-pressed=false]").wait_for()
    assert await note.locator(".score").inner_text() == "0"
    await note.locator("#comment-body").fill("Also true for the admin sign-up page.")
    await note.locator("#comment-form button").click()
    comment = note.locator("ul.comments li.comment")
    await comment.wait_for()
    assert "Also true for the admin sign-up page." in await comment.inner_text()
    assert "(you)" in await comment.locator(".author").inner_text()
    assert await note.locator(".comment-count").inner_text() == "1"
    await comment.scroll_into_view_if_needed()
    await shots.take(page, "commons-comment")
    assert [p.name for p in shots.taken] == [
        f"commons-{state}.png" for state in ("post", "search", "vote", "comment")
    ]
    assert opened.errors == [], opened.errors
    await page.close()


async def test_commons_lists_recent_notes_pages_and_names_authors(
    console: Console, shots: Screenshots
) -> None:
    colleague = await console.stack.key("colleague")
    async with console.stack.client(colleague) as rest:
        named = await rest.put("/v1/me", json={"display_name": "Colleague <b>Kim</b>"})
        assert named.status_code == 200, named.text
        fillers = [
            (await rest.post("/v1/posts", json={"title": f"Filler {i}", "body": "x"})).json()
            for i in range(10)
        ]
    async with console.stack.client(console.key) as rest:
        voted = await rest.post(f"/v1/posts/{fillers[3]['id']}/votes", json={"direction": "up"})
        assert voted.status_code == 200, voted.text
    try:
        opened = await _open(console, console.key)
        page = opened.page
        await page.click("#tab-commons")
        # Opening the tab lists the newest notes, a page at a time, authors by name.
        recent = page.locator("#commons-recent article.note")
        await recent.nth(9).wait_for()
        assert await recent.count() == 10
        first = recent.first
        assert await first.locator("h3").inner_text() == "Filler 9"
        assert await first.locator(".author").inner_text() == "Colleague <b>Kim</b>"
        assert await page.locator("#commons-recent .author b").count() == 0
        await shots.take(page, "commons-list")
        await page.click("#recent-more")
        await recent.nth(10).wait_for()
        await page.locator("#recent-more").wait_for(state="hidden")
        titles = await page.locator("#commons-recent article.note h3").all_inner_texts()
        assert titles[:10] == [f"Filler {i}" for i in range(9, -1, -1)]
        assert "Sign-up lives in auth/signup.tsx" in titles[10:]
        await page.select_option("#recent-sort", "top")
        await page.wait_for_function(
            "() => document.querySelector('#commons-recent article.note h3')?.textContent"
            " === 'Filler 3'"
        )

        # This key names itself; the name is shown as the text it is, never as markup.
        hostile = '<img src=x onerror="window.pwned = 3">'
        await page.click("#commons-me summary")
        await page.fill("#display-name", hostile)
        await page.click("#name-form button[type=submit]")
        await page.locator("#commons-state.ok").wait_for()
        assert await page.inner_text("#me-summary") == hostile
        await page.select_option("#recent-sort", "new")
        await page.click("#commons-new summary")
        await page.fill("#post-title", "Named authors")
        await page.fill("#post-body", "Shown by name.")
        await page.click("#post-form button[type=submit]")
        await page.wait_for_function(
            "() => document.querySelector('#commons-recent article.note h3')?.textContent"
            " === 'Named authors'"
        )
        mine = recent.first.locator(".author")
        assert await mine.inner_text() == f"{hostile} (you)"
        assert await page.locator("#note-view .meta .author").inner_text() == f"{hostile} (you)"
        assert await page.locator("#panel-commons img").count() == 0
        assert await page.evaluate("window.pwned") is None
        # Another contributor's name, in another case, is refused and said so.
        await page.fill("#display-name", "COLLEAGUE <B>KIM</B>")
        await page.click("#name-form button[type=submit]")
        await page.locator("#commons-error").wait_for()
        assert "already has that name" in await page.inner_text("#commons-error")
        assert opened.errors == [], opened.errors
        await page.close()
    finally:
        # Authors are shown by number again for the module's other tests.
        for key in (colleague, console.key):
            async with console.stack.client(key) as rest:
                await rest.put("/v1/me", json={"display_name": None})


async def test_notes_anchored_to_code_show_under_it_and_open_in_the_commons(
    console: Console, shots: Screenshots
) -> None:
    title = "ParseConfig reads the file on every call"
    async with console.stack.client(console.stack.admin_key) as admin:
        posted = await admin.post(
            "/v1/posts",
            json={
                "title": title,
                "body": "cache it",
                "anchors": [{"repo": SLUG, "symbol": "ParseConfig"}],
            },
        )
        assert posted.status_code == 201, posted.text
        note_id = posted.json()["id"]
    try:
        opened = await _open(console, console.key)
        page = opened.page
        await _search(page, "ParseConfig")
        notes = page.locator("#code-results li.result .code-notes li")
        await notes.first.wait_for()
        assert await notes.first.locator(".note-status.fresh").inner_text() == "fresh"
        link = notes.first.locator("a")
        assert await link.inner_text() == title
        assert await link.get_attribute("href") == f"#commons?note={note_id}"
        await shots.take(page, "results-with-notes")

        # The file view shows the notes of the lines it holds.
        await page.locator("#code-results li.result a.where").first.click()
        await page.locator(f"#L{CLASS_LINE}.hll").wait_for()
        assert title in await page.locator("#panel-file .code-notes").inner_text()
        await shots.take(page, "file-with-notes")

        await page.locator("#panel-file .code-notes a").first.click()
        await page.locator("#note-view").get_by_text(title).first.wait_for()
        assert await page.is_visible("#panel-commons")
        await shots.take(page, "note-from-code")
        assert not opened.errors, opened.errors
    finally:
        async with console.stack.client(console.stack.admin_key) as admin:
            gone = await admin.request("DELETE", f"/v1/posts/{note_id}", json={"reason": "test"})
            assert gone.status_code in (200, 204), gone.text


async def _open_note(console: Console, key: str, title: str, *, wrote: bool = False) -> Opened:
    """The commons tab with `key` and the note `title` opened from the recent list; when
    the key `wrote` in the commons, once the page knows whose key it is."""
    opened = await _open(console, key)
    page = opened.page
    await page.click("#tab-commons")
    if wrote:
        await page.wait_for_function(
            "() => document.getElementById('me-summary').textContent !== 'not set'"
        )
    await page.locator("#commons-recent article.note h3 button", has_text=title).first.click()
    await page.locator("#note-view").wait_for()
    return opened


async def test_a_notes_anchors_and_their_confirmation(console: Console, shots: Screenshots) -> None:
    """Last in the module: it changes the indexed repository. The note's anchors show their
    code, status and a link to it; only the author and admins get a confirm button, on the
    anchor whose code changed, and confirming it makes it fresh."""
    stack = console.stack
    title = "run() reads the whole file"
    async with stack.client(console.key) as rest:
        posted = await rest.post(
            "/v1/posts",
            json={
                "title": title,
                "body": "Large configs are read into memory at once.",
                "anchors": [
                    {"repo": SLUG, "symbol": "run"},
                    {
                        "repo": SLUG,
                        "path": "config.py",
                        "start_line": LOAD_LINE,
                        "end_line": LOAD_LINE,
                    },
                ],
            },
        )
        assert posted.status_code == 201, posted.text
    post_id = posted.json()["id"]
    main = console.source / "main.py"
    write(console.source, "main.py", main.read_text().replace(".load(path)", ".load(path).strip()"))
    commit_all(console.source, "strip", JAN)
    reader = await stack.key("anchor-reader")
    async with stack.client(stack.admin_key) as admin:
        started = await admin.post(
            "/api/repositories", json={"source": str(console.source), "slug": SLUG}
        )
        assert started.status_code == 202, started.text
        assert (await wait_job(admin, started.json()["job"]["id"]))["state"] == "succeeded"
        granted = await admin.post(
            "/api/access/grant", json={"principal_id": "anchor-reader", "repository": SLUG}
        )
        assert granted.status_code == 200, granted.text
    assert stack.commons is not None and stack.commons.anchor_watch is not None
    await stack.commons.anchor_watch.check()

    anchors = "#note-view .anchors li.anchor"
    # A reader of the code who did not write the note: the anchors, no confirm button.
    opened = await _open_note(console, reader, title)
    page = opened.page
    await page.locator(anchors).nth(1).wait_for()
    statuses = [await a.get_attribute("data-status") for a in await page.locator(anchors).all()]
    assert statuses == ["body_changed", "fresh"]
    assert await page.locator("#note-view button.confirm-anchor").count() == 0
    first = page.locator(anchors).first
    assert await first.locator(".repo").inner_text() == SLUG
    assert (await first.locator("a.where").inner_text()).endswith("run")
    assert await first.locator("a.where").get_attribute("href") == (
        f"#file?repo={SLUG.replace('/', '%2F')}&path=main.py&start=4&end=5"
    )
    assert opened.errors == [], opened.errors
    await page.close()
    # An admin may confirm it.
    opened = await _open_note(console, stack.admin_key, title)
    await opened.page.locator("#note-view button.confirm-anchor").wait_for()
    await opened.page.close()
    # Its author confirms it: fresh at the commit indexed now.
    opened = await _open_note(console, console.key, title, wrote=True)
    page = opened.page
    confirm = page.locator("#note-view button.confirm-anchor")
    await confirm.wait_for()
    assert await confirm.count() == 1
    assert (
        await page.locator(f"{anchors}[data-status=body_changed] button.confirm-anchor").count()
        == 1
    )
    await shots.take(page, "commons-anchors")
    await confirm.click()
    await page.locator(f"{anchors}[data-status=fresh]").nth(1).wait_for()
    assert await confirm.count() == 0
    assert "Anchor confirmed" in await page.inner_text("#commons-state")
    await shots.take(page, "commons-anchor-confirmed")
    assert opened.errors == [], opened.errors
    await page.close()
    async with stack.client(console.key) as rest:
        stored = (await rest.get(f"/v1/posts/{post_id}")).json()["anchors"]
    assert [a["status"] for a in stored] == ["fresh", "fresh"]
