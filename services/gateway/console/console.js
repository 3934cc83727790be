// The /search console: a small page over the gateway's REST API, with the key the person
// enters and nothing more. No framework and no innerHTML with data: every value (a file's
// highlighted tokens included) is put into the page as text, so nothing a result or a file
// contains can run as script (the page's CSP forbids inline script as a second line).
//
// Views are addressed by the URL's fragment, so paths are links, Back works and a view can
// be shared: #search (code search), #commons, #file?repo=&path=&start=&end= (a file at the
// indexed commit, scrolled to the range), #refs?repo=&symbol= (a symbol's references).
"use strict";

const KEY_STORAGE = "cograph.apiKey";
// The commons' number of the person using this key (GET /v1/me, or their own post or
// comment), to mark what they wrote as theirs.
const ME_STORAGE = "cograph.contributorNo";
const COMMENT_MAX_CHARS = 5000;
// Notes per page of the recent list.
const RECENT_PAGE = 10;
// A file view starts this many lines before the range when the range is past the first
// read (a read answers at most 2000 lines), so that the range has context above it.
const CONTEXT_LINES = 200;
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === null || value === undefined || value === false) continue;
    if (name === "class") node.className = value;
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

// An error box of one view: set, or emptied and hidden with "".
function showError(id, message) {
  const box = $(id);
  box.textContent = message;
  box.hidden = !message;
}

function showState(id, message, kind = "") {
  const box = $(id);
  box.textContent = message;
  box.className = `state ${kind}`.trim();
  box.hidden = !message;
}

function storedKey() {
  return localStorage.getItem(KEY_STORAGE) || "";
}

async function api(path, options = {}, key = storedKey()) {
  const headers = { Accept: "application/json" };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  let reply;
  try {
    reply = await fetch(path, {
      method: options.method || "GET",
      headers,
      body: options.body === undefined ? undefined : JSON.stringify(options.body),
    });
  } catch (_) {
    const error = new Error("the gateway did not answer (network error)");
    error.code = "network";
    throw error;
  }
  let data = null;
  try { data = await reply.json(); } catch (_) { data = null; }
  if (!reply.ok) {
    const code = (data && data.error) || `http_${reply.status}`;
    const detail = (data && data.detail) || reply.statusText;
    const error = new Error(`${code}: ${detail}`);
    error.code = code;
    error.status = reply.status;
    throw error;
  }
  return data;
}

function hrefOf(view, params) {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(params)) {
    if (value !== null && value !== undefined && value !== "" && value !== 0) query.set(name, String(value));
  }
  return `#${view}?${query}`;
}

// A link to a file (or a collection document) at the indexed commit, at lines start..end.
function fileHref(source, path, start, end) {
  return hrefOf("file", {
    repo: source.repo, ref: source.ref, collection: source.collection, path, start, end: end || start,
  });
}

function refsHref(repo, ref, symbol) {
  return hrefOf("refs", { repo, ref, symbol });
}

function shortCommit(commit) {
  return commit ? `@${String(commit).slice(0, 10)}` : null;
}

// ---- whole-word highlighting of the query's terms ----

const WORD = /[\p{L}\p{N}_]+/gu;
// The parts of an identifier: ParseConfig -> Parse, Config; HTTPServer -> HTTP, Server;
// parse_config -> parse, config.
const PART = /\p{Lu}+(?!\p{Ll})|\p{Lu}?\p{Ll}+|\p{N}+|\p{L}+/gu;
// Words too common to be worth marking in a question.
const STOP_WORDS = new Set(("a an and are as at be by can do does for from has have how i if in " +
  "into is it its me my no not of on or our so that the their then there this to was we what " +
  "when where which who why will with you").split(" "));

function queryTerms(query) {
  const terms = new Set();
  for (const [word] of query.matchAll(WORD)) {
    for (const term of [word, ...[...word.matchAll(PART)].map((m) => m[0])]) {
      const lower = term.toLowerCase();
      if (lower.length > 1 && !STOP_WORDS.has(lower)) terms.add(lower);
    }
  }
  return terms;
}

// Marks whole words that are terms, or whole identifier parts that are ("config" in
// ParseConfig), never a term inside a word ("is" in "This").
function highlighted(text, terms) {
  const fragment = document.createDocumentFragment();
  let last = 0;
  const mark = (start, end) => {
    if (start > last) fragment.append(text.slice(last, start));
    fragment.append(el("mark", {}, text.slice(start, end)));
    last = end;
  };
  if (terms.size) {
    for (const match of text.matchAll(WORD)) {
      const word = match[0];
      if (terms.has(word.toLowerCase())) {
        mark(match.index, match.index + word.length);
        continue;
      }
      for (const part of word.matchAll(PART)) {
        if (terms.has(part[0].toLowerCase())) {
          mark(match.index + part.index, match.index + part.index + part[0].length);
        }
      }
    }
  }
  if (last < text.length) fragment.append(text.slice(last));
  return fragment;
}

// ---- the key ----

function setKeyStatus(message, kind = "") {
  const status = $("key-status");
  status.textContent = message;
  status.className = kind;
}

function keyLabel(key) {
  return `using ${key.slice(0, 9)}…`;
}

// Checks a key with a call any valid key may make; the answer also fills the sources.
async function checkKey(key) {
  try {
    const repositories = await api("/api/repositories", {}, key);
    return { ok: true, repositories };
  } catch (error) {
    return { ok: false, error };
  }
}

async function useKey(key, saved) {
  setKeyStatus("checking the key…");
  const checked = await checkKey(key);
  if (!checked.ok && checked.error.status === 401) {
    if (saved) localStorage.removeItem(KEY_STORAGE);
    setKeyStatus(saved ? "invalid key: the saved key was refused (revoked?); paste another"
      : "invalid key: the gateway refused it", "bad");
    resetSources();
    return;
  }
  if (!saved) {
    if (storedKey() !== key) localStorage.removeItem(ME_STORAGE);
    localStorage.setItem(KEY_STORAGE, key);
  }
  if (!checked.ok) {
    setKeyStatus(`${keyLabel(key)} (not checked: ${checked.error.message})`, "warn");
    return;
  }
  setKeyStatus(keyLabel(key), "ok");
  // A key entered while the commons is shown: its own name and list (a saved key's were
  // loaded when the page opened on the tab).
  if (!saved && !$("panel-commons").hidden) openCommons();
  await loadSources(checked.repositories);
}

function resetSources() {
  $("code-repo").replaceChildren(el("option", { value: "" }, "all readable repositories"));
  syncOptions();
}

async function loadSources(repos) {
  const select = $("code-repo");
  let collections = { collections: [] };
  try {
    collections = await api("/api/collections");
  } catch (error) {
    showError("code-error", error.message);
  }
  resetSources();
  const repoGroup = el("optgroup", { label: "repositories" });
  for (const repo of repos.repositories) {
    // Stale: the branch has moved on since it was indexed; results may miss changes.
    const mark = repo.freshness === "stale" ? " (stale)" : "";
    repoGroup.append(el("option", { value: `repo:${repo.slug}` }, repo.slug + mark));
  }
  const collectionGroup = el("optgroup", { label: "collections" });
  for (const collection of collections.collections) {
    collectionGroup.append(el("option", { value: `collection:${collection.name}` }, collection.name));
  }
  for (const group of [repoGroup, collectionGroup]) if (group.children.length) select.append(group);
  syncOptions();
}

// A collection holds only md_collection chunks, and repositories never do; the graph is
// expanded in one repository, so it can be asked for only with one chosen.
function syncOptions() {
  const source = $("code-repo").value;
  const collection = source.startsWith("collection:");
  for (const box of $("code-layers").querySelectorAll("input")) {
    const isCollectionLayer = box.value === "md_collection";
    box.disabled = collection !== isCollectionLayer;
    if (collection) box.checked = isCollectionLayer;
    else if (isCollectionLayer) box.checked = false;
  }
  const graph = $("code-graph");
  graph.disabled = !source.startsWith("repo:");
  if (graph.disabled) graph.checked = false;
}

// ---- code search ----

// Everything one search shows, so that a new search or an error replaces all of it.
const search = { generation: 0, body: null, explained: null };

function resetCodeView() {
  showError("code-error", "");
  showState("code-state", "");
  $("code-streams").replaceChildren();
  $("code-results").replaceChildren();
  $("code-graph-view").replaceChildren();
  search.body = null;
  search.explained = null;
}

function isoOrNull(id) {
  const value = $(id).value;
  return value ? new Date(value).toISOString() : null;
}

function searchBody() {
  const body = {
    query: $("code-query").value,
    top_k: Number($("code-top-k").value),
    snippet_chars: Number($("code-snippet").value),
    layers: [...$("code-layers").querySelectorAll("input:checked")].map((i) => i.value),
    include_graph: $("code-graph").checked,
    verbose: true, // ids, layers and provenance
  };
  const source = $("code-repo").value;
  if (source.startsWith("repo:")) body.repo = source.slice("repo:".length);
  if (source.startsWith("collection:")) body.collection = source.slice("collection:".length);
  for (const [field, id] of [["since", "code-since"], ["until", "code-until"], ["as_of", "code-as-of"]]) {
    const value = isoOrNull(id);
    if (value) body[field] = value;
  }
  return body;
}

function num(value) {
  return typeof value === "number" ? value.toFixed(4) : "";
}

function provenanceTable(provenance) {
  const table = el("table", { class: "provenance" },
    el("tr", {}, el("th", {}, "stream"), el("th", {}, "rank"), el("th", {}, "raw score")));
  for (const p of provenance || []) {
    table.append(el("tr", {}, el("td", {}, p.stream), el("td", {}, p.rank), el("td", {}, num(p.score))));
  }
  return table;
}

function stagesTable(stages) {
  // Each ranking stage's effect on this result: rank and score before and after.
  const table = el("table", { class: "stages" },
    el("tr", {}, el("th", {}, "stage"), el("th", {}, "rank"), el("th", {}, "score")));
  for (const s of stages) {
    const rank = s.rank_before == null ? `${s.rank_after}` : `${s.rank_before} → ${s.rank_after}`;
    const score = s.score_before == null ? num(s.score_after) : `${num(s.score_before)} → ${num(s.score_after)}`;
    table.append(el("tr", {}, el("td", {}, s.stage), el("td", {}, rank), el("td", {}, score)));
  }
  return table;
}

function confidenceBadge(level) {
  // high / medium / low from the streams' evidence (README, "Confidence").
  if (!["high", "medium", "low"].includes(level)) return null;
  return el("span", { class: `confidence ${level}`, title: "confidence" }, level);
}

// The commons' notes anchored to a piece of code, compact: the anchor's status as a badge
// and the title, which opens the note in the commons tab.
function codeNotes(notes) {
  if (!notes || !notes.length) return null;
  return el("ul", { class: "code-notes", "aria-label": "notes on this code" }, ...notes.map((note) =>
    el("li", {},
      el("span", { class: `note-status ${note.status}`, title: "the note's anchor" }, note.status.replace("_", " ")),
      " ", el("a", { href: hrefOf("commons", { note: note.id }) }, note.title))));
}

function sourceOf(item) {
  return { repo: item.repo || "", ref: item.ref || "", collection: item.collection || "" };
}

function whereText(result) {
  const lines = result.start_line ? `:${result.start_line}-${result.end_line}` : "";
  const owner = result.repo || result.collection;
  return `${owner ? owner + "/" : ""}${result.path}${lines}`;
}

function codeResult(result, rank, terms) {
  const where = el("a", { class: "where", href: fileHref(sourceOf(result), result.path, result.start_line, result.end_line) },
    whereText(result));
  const meta = [result.kind, result.qualified_name, shortCommit(result.commit),
    typeof result.score === "number" ? `fused ${result.score.toFixed(4)}` : null]
    .filter(Boolean).join(" · ");
  const explainView = el("div", { class: "explain-view", hidden: true });
  const explainButton = el("button", { type: "button", class: "explain", "aria-expanded": "false" }, "explain");
  explainButton.addEventListener("click", () => toggleExplain(result, explainButton, explainView));
  const actions = el("div", { class: "actions" }, explainButton);
  if (result.repo && result.qualified_name && result.store === "code") {
    actions.append(el("a", { class: "references", href: refsHref(result.repo, result.ref, result.qualified_name) },
      "references"));
  }
  return el("li", { class: "result", "data-rank": rank, "data-id": result.id },
    el("div", { class: "head" },
      el("span", { class: "rank" }, `${rank}.`),
      el("span", { class: "layer-label", title: "layer" }, result.layer),
      confidenceBadge(result.confidence), where),
    el("div", { class: "meta" }, meta),
    el("pre", {}, highlighted(result.snippet || "", terms)),
    result.truncated ? el("div", { class: "truncated" }, "snippet truncated") : null,
    codeNotes(result.notes), actions, explainView);
}

// The explanation of one result: the same search asked again with explain (once per
// search), then this result's streams and each ranking stage's effect on it.
async function toggleExplain(result, button, view) {
  if (!view.hidden) {
    view.hidden = true;
    button.setAttribute("aria-expanded", "false");
    return;
  }
  view.hidden = false;
  button.setAttribute("aria-expanded", "true");
  view.replaceChildren(el("p", { class: "empty" }, "explaining…"));
  const generation = search.generation;
  try {
    if (!search.explained) {
      const explained = api("/api/search", { method: "POST", body: { ...search.body, explain: true } });
      search.explained = explained;
      explained.catch(() => { if (search.explained === explained) search.explained = null; });
    }
    const answer = await search.explained;
    if (generation !== search.generation) return;
    const same = answer.results.find((r) => r.id === result.id && r.layer === result.layer);
    if (!same) {
      view.replaceChildren(el("p", { class: "empty" }, "this result is not in the explained answer (the index changed?)"));
      return;
    }
    const explanation = answer.explanation || {};
    const stages = el("ol", { class: "stage-runs" });
    for (const run of explanation.stages || []) {
      stages.append(el("li", { class: run.applied ? "applied" : "idle" }, el("strong", {}, run.name), ` — ${run.detail}`));
    }
    view.replaceChildren(
      el("p", { class: "query-class" }, `ranking: ${explanation.query_class || "unclassified"} question`),
      provenanceTable(same.provenance),
      stagesTable(same.stages || []),
      el("details", {}, el("summary", {}, "what each stage did to this search"), stages));
  } catch (error) {
    if (generation === search.generation) view.replaceChildren(el("p", { class: "error" }, error.message));
  }
}

function renderStreams(streams) {
  const bar = $("code-streams");
  const reasons = streams.reasons || {};
  for (const [name, state] of Object.entries(streams)) {
    if (name === "reasons" || typeof state !== "string") continue;
    const why = reasons[name] ? ` (${reasons[name]})` : "";
    bar.append(el("span", { class: state === "unavailable" ? "unavailable" : "" }, `${name}: ${state}${why}`));
  }
}

function nodeLink(node) {
  return el("a", { href: fileHref(sourceOf(node), node.path, node.start_line, node.end_line) },
    node.qualified_name || node.path);
}

function renderGraph(graph, results) {
  const view = $("code-graph-view");
  if (!graph || !(graph.nodes || []).length) return;
  // Edges name node ids, the results' among them: each end is a link to where it is.
  const nodes = new Map([...results.map((r) => [r.id, r]), ...graph.nodes.map((n) => [n.id, n])]);
  const end = (id) => (nodes.has(id) ? nodeLink(nodes.get(id)) : id);
  const edges = el("ul", { class: "edges" });
  for (const edge of graph.edges || []) {
    edges.append(el("li", {}, end(edge.from), ` —${edge.kind}→ `, end(edge.to)));
  }
  const list = el("ul", { class: "nodes" });
  for (const node of graph.nodes) {
    list.append(el("li", {}, el("span", { class: "kind" }, node.kind), " ", nodeLink(node),
      el("span", { class: "meta" }, ` ${node.path}:${node.start_line}`), " ",
      node.repo ? el("a", { class: "references", href: refsHref(node.repo, node.ref, node.qualified_name) }, "references") : null));
  }
  view.append(el("h2", { class: "section" }, `graph (${graph.nodes.length} nodes${graph.truncated ? ", truncated" : ""})`),
    list, el("h3", { class: "section" }, "edges"), edges);
}

async function runCodeSearch(event) {
  event.preventDefault();
  resetCodeView();
  const generation = ++search.generation;
  const body = searchBody();
  showState("code-state", "searching…");
  try {
    const data = await api("/api/search", { method: "POST", body });
    if (generation !== search.generation) return;
    search.body = body;
    showState("code-state", "");
    renderStreams(data.streams || {});
    const terms = queryTerms(body.query);
    const results = $("code-results");
    // Ranked order, as the answer gives it: the layer is a label on each result.
    data.results.forEach((result, i) => results.append(codeResult(result, i + 1, terms)));
    if (!data.results.length) {
      showState("code-state", `No results for “${body.query}”.`, "empty");
    } else if (data.no_good_answer) {
      showState("code-state", "No good answer: no result is above low confidence; the index likely " +
        "holds nothing on this. The closest results follow.", "low");
    }
    renderGraph(data.graph, data.results);
  } catch (error) {
    if (generation !== search.generation) return;
    resetCodeView();
    showError("code-error", error.code === "unauthenticated" ? `invalid key: ${error.message}` : error.message);
  }
}

// ---- the file view ----

// The file on screen (its read, by target) and the outline beside it.
const file = { key: "", reply: null, generation: 0, outlineKey: "" };

function fileTarget(params) {
  const target = { path: params.get("path") || "" };
  for (const name of ["repo", "ref", "collection"]) if (params.get(name)) target[name] = params.get(name);
  return target;
}

function markRange(start, end) {
  for (const line of $("file-code").querySelectorAll(".line.hll")) line.classList.remove("hll");
  if (!start) return;
  for (let n = start; n <= end; n++) {
    const line = $(`L${n}`);
    if (line) line.classList.add("hll");
  }
  // Only the code view scrolls (to put the range's first line in its middle); the page
  // keeps its header in sight.
  const first = $(`L${start}`);
  const view = $("file-code");
  if (first) view.scrollTop = Math.max(0, first.offsetTop - view.clientHeight / 2);
}

function renderFile(target, reply) {
  const source = sourceOf(target);
  const lines = reply.highlight.lines;
  const code = el("div", {});
  lines.forEach((tokens, i) => {
    const n = reply.start_line + i;
    const src = el("span", { class: "src" });
    for (const [cls, text] of tokens) src.append(cls ? el("span", { class: cls }, text) : text);
    code.append(el("div", { class: "line", id: `L${n}` },
      el("a", { class: "ln", href: fileHref(source, target.path, n, n) }, n), src));
  });
  $("file-code").replaceChildren(...code.childNodes);
  const owner = target.repo || target.collection;
  $("file-title").textContent = `${owner}/${target.path}`;
  $("file-meta").textContent = [target.ref ? `ref ${target.ref}` : null, shortCommit(reply.commit),
    reply.highlight.lexer].filter(Boolean).join(" · ");
  const span = $("file-window");
  span.replaceChildren(`lines ${reply.start_line}–${reply.end_line} of ${reply.total_lines}`);
  if (reply.start_line > 1) {
    span.append(" ", el("a", { href: hrefOf("file", { ...target, from: Math.max(1, reply.start_line - 2000) }) }, "earlier lines"));
  }
  if (reply.next_start_line) {
    span.append(" ", el("a", { href: hrefOf("file", { ...target, from: reply.next_start_line }) }, "later lines"));
  }
  const notes = codeNotes(reply.notes);
  if (notes) span.after(notes);
}

function outlineList(target, symbols) {
  const list = el("ul", {});
  for (const symbol of symbols) {
    const item = el("li", {},
      el("a", { href: fileHref(sourceOf(target), target.path, symbol.start_line, symbol.end_line) },
        el("span", { class: "kind" }, symbol.kind), " ", symbol.name));
    if (symbol.qualified_name) {
      item.append(" ", el("a", { class: "references", href: refsHref(target.repo, target.ref, symbol.qualified_name),
        title: `references to ${symbol.qualified_name}` }, "refs"));
    }
    if ((symbol.children || []).length) item.append(outlineList(target, symbol.children));
    list.append(item);
  }
  return list;
}

async function loadOutline(target, generation) {
  const aside = $("file-outline");
  aside.replaceChildren(el("h3", {}, "outline"));
  if (!target.repo) {
    aside.append(el("p", { class: "empty" }, "no outline for a collection document"));
    return;
  }
  try {
    const outline = await api(`/api/outline?${new URLSearchParams({ repo: target.repo, path: target.path, ...(target.ref ? { ref: target.ref } : {}) })}`);
    if (generation !== file.generation) return;
    if (!outline.symbols.length) aside.append(el("p", { class: "empty" }, "no symbols"));
    else aside.append(outlineList(target, outline.symbols));
    if (outline.truncated) aside.append(el("p", { class: "truncated" }, "outline truncated"));
  } catch (error) {
    if (generation === file.generation) aside.append(el("p", { class: "error" }, error.message));
  }
}

async function readFile(target, from) {
  const body = { ...target };
  if (from > 1) body.start_line = from;
  return api("/console/api/read", { method: "POST", body });
}

async function showFile(params) {
  const target = fileTarget(params);
  const start = Number(params.get("start")) || 0;
  const end = Math.max(start, Number(params.get("end")) || start);
  const from = Number(params.get("from")) || (start > 2000 - CONTEXT_LINES ? start - CONTEXT_LINES : 1);
  const key = JSON.stringify(target);
  const shown = file.reply;
  // The same file with the range already on screen: only the marked lines change.
  if (file.key === key && shown && !params.get("from") && start >= shown.start_line && end <= shown.end_line) {
    markRange(start, end);
    return;
  }
  const generation = ++file.generation;
  showError("file-error", "");
  file.key = "";
  file.reply = null;
  $("file-code").replaceChildren(el("p", { class: "empty" }, "reading…"));
  $("file-window").replaceChildren();
  $("panel-file").querySelector(".code-notes")?.remove();
  $("file-title").textContent = target.path;
  $("file-meta").textContent = "";
  if (file.outlineKey !== key) {
    file.outlineKey = key;
    loadOutline(target, generation);
  }
  try {
    let reply = await readFile(target, from);
    // A range past what one read holds (long lines): read again from just above it.
    if (start && (start < reply.start_line || start > reply.end_line) && !params.get("from")) {
      reply = await readFile(target, Math.max(1, start - CONTEXT_LINES));
    }
    if (generation !== file.generation) return;
    file.key = key;
    file.reply = reply;
    renderFile(target, reply);
    markRange(start, end);
  } catch (error) {
    if (generation !== file.generation) return;
    file.outlineKey = "";
    $("file-code").replaceChildren();
    $("file-outline").replaceChildren();
    showError("file-error", error.message);
  }
}

// ---- references ----

async function showReferences(params, cursor = "") {
  const request = { repo: params.get("repo") || "", symbol: params.get("symbol") || "" };
  if (params.get("ref")) request.ref = params.get("ref");
  if (cursor) request.cursor = cursor;
  const list = $("refs-list");
  const generation = cursor ? file.generation : ++file.generation;
  if (!cursor) {
    showError("refs-error", "");
    $("refs-title").textContent = `references to ${request.symbol} in ${request.repo}`;
    list.replaceChildren(el("p", { class: "empty" }, "looking…"));
  }
  try {
    const data = await api("/api/references", { method: "POST", body: request });
    if (generation !== file.generation) return;
    const source = { repo: request.repo, ref: request.ref };
    if (!cursor) {
      list.replaceChildren();
      const definitions = el("ul", { class: "definitions" });
      for (const node of data.definitions) {
        definitions.append(el("li", {},
          el("a", { href: fileHref(source, node.path, node.start_line, node.end_line) }, `${node.path}:${node.start_line}-${node.end_line}`),
          " ", el("span", { class: "kind" }, node.kind), " ", node.signature || node.qualified_name));
      }
      list.append(el("h3", {}, `definitions (${data.definitions.length})`), definitions,
        el("h3", {}, "references"), el("ul", { class: "uses", id: "refs-uses" }));
    }
    const uses = $("refs-uses");
    for (const use of data.references) {
      const line = use.line || use.start_line;
      uses.append(el("li", {},
        el("a", { href: fileHref(source, use.path, line, line) }, `${use.path}:${line}`),
        " ", el("span", { class: "kind" }, use.kind), use.symbol ? ` in ${use.symbol}` : "",
        codeNotes(use.notes)));
    }
    $("refs-more")?.remove();
    if (!uses.children.length) uses.append(el("li", { class: "empty" }, "no references found"));
    if (data.next_cursor) {
      const more = el("button", { type: "button", id: "refs-more" }, "more references");
      more.addEventListener("click", () => showReferences(params, data.next_cursor));
      list.append(more);
    }
  } catch (error) {
    if (generation !== file.generation) return;
    if (!cursor) list.replaceChildren();
    showError("refs-error", error.message);
  }
}

// ---- commons ----

function me() {
  return Number(localStorage.getItem(ME_STORAGE)) || 0;
}

function rememberMe(contributorNo) {
  if (contributorNo) localStorage.setItem(ME_STORAGE, String(contributorNo));
}

// An author is shown by the display name they set, else by their contributor number (a
// stable public handle). The name is someone's text: el() puts it in as text, never markup.
function author(contributorNo, name) {
  return el("span", { class: "author", title: `contributor ${contributorNo}` },
    name || `contributor ${contributorNo}`,
    contributorNo === me() ? el("span", { class: "you" }, " (you)") : null);
}

function when(timestamp) {
  return timestamp ? new Date(timestamp).toLocaleString() : "";
}

function resetCommonsView() {
  showError("commons-error", "");
  showState("commons-state", "");
}

function tagList(tags) {
  return (tags || []).map((t) => el("span", { class: "tag" }, t));
}

function commentItem(comment) {
  return el("li", { class: "comment" }, el("div", { class: "meta" }, author(comment.contributor_no, comment.author_name), ` · ${when(comment.created_at)}`),
    el("div", { class: "body" }, comment.body));
}

// Whether this key is an admin's: no answer about a key says so, and the moderation log
// answers admin keys only (one entry asked for). Asked once per key, when a note with a
// changed anchor is shown to someone who did not write it.
const adminKeys = new Map();

async function isAdmin() {
  const key = storedKey();
  if (!adminKeys.has(key)) {
    adminKeys.set(key, api("/v1/moderation/log?limit=1").then(() => true, () => false));
  }
  return adminKeys.get(key);
}

// The anchor statuses a note's author (or an admin) may confirm once they have read the
// code again: its code changed or moved. An orphaned anchor's code is gone (409).
const CONFIRMABLE = new Set(["body_changed", "signature_changed", "moved"]);

function anchorBadge(status) {
  return el("span", { class: `anchor-status ${status}`, title: "anchor status" }, status.replace("_", " "));
}

// One anchor: its repository, the symbol or lines it names as links to the code (where it
// moved to, when it moved), its status, and a confirm button when `mayConfirm`.
function anchorItem(post, anchor, mayConfirm) {
  const source = { repo: anchor.repo, ref: "", collection: "" };
  const name = anchor.symbol ? anchor.qualified_name : `${anchor.path}:${anchor.start_line}-${anchor.end_line}`;
  const item = el("li", { class: "anchor", "data-id": anchor.id, "data-status": anchor.status },
    anchorBadge(anchor.status), " ", el("span", { class: "repo" }, anchor.repo), " ",
    el("a", { class: "where", href: fileHref(source, anchor.path, anchor.start_line, anchor.end_line) }, name));
  const moved = anchor.moved_to;
  if (moved) {
    item.append(" → ", el("a", { class: "moved-to", href: fileHref(source, moved.path, moved.start_line, moved.end_line) },
      `${moved.qualified_name} (${moved.path}:${moved.start_line}-${moved.end_line})`));
  }
  item.append(el("span", { class: "checked" }, ` checked ${shortCommit(anchor.checked_commit) || ""}`));
  if (mayConfirm && CONFIRMABLE.has(anchor.status)) {
    const confirm = el("button", { type: "button", class: "confirm-anchor", title: "the note still holds for the code as it is now" }, "confirm");
    confirm.addEventListener("click", async () => {
      resetCommonsView();
      confirm.disabled = true;
      try {
        const fresh = await api(`/v1/posts/${encodeURIComponent(post.id)}/anchors/${encodeURIComponent(anchor.id)}/confirm`, { method: "POST" });
        item.replaceWith(anchorItem(post, fresh, mayConfirm));
        showState("commons-state", "Anchor confirmed: fresh at the current commit.", "ok");
      } catch (error) {
        confirm.disabled = false;
        showError("commons-error", error.message);
      }
    });
    item.append(" ", confirm);
  }
  return item;
}

async function anchorList(post) {
  const anchors = post.anchors || [];
  if (!anchors.length) return null;
  const changed = anchors.some((a) => CONFIRMABLE.has(a.status));
  const mayConfirm = changed && (post.contributor_no === me() || await isAdmin());
  return el("div", { class: "anchors" }, el("h4", {}, "anchored to"),
    el("ul", {}, ...anchors.map((a) => anchorItem(post, a, mayConfirm))));
}

function renderNote(post, comments, terms, anchors) {
  const score = el("span", { class: "score" }, String(post.score));
  const count = el("span", { class: "comment-count" }, String(post.comment_count));
  const voteButtons = [["up", "▲ up"], ["down", "▼ down"]].map(([direction, label]) => {
    const button = el("button", { type: "button", class: `vote-${direction}`, "aria-pressed": "false" }, label);
    button.addEventListener("click", async () => {
      resetCommonsView();
      // Pressing the vote in force withdraws it.
      const wanted = button.getAttribute("aria-pressed") === "true" ? "none" : direction;
      try {
        const reply = await api(`/v1/posts/${encodeURIComponent(post.id)}/votes`, { method: "POST", body: { direction: wanted } });
        score.textContent = String(reply.score);
        for (const b of voteButtons) b.setAttribute("aria-pressed", String(b.className === `vote-${reply.direction}`));
      } catch (error) {
        showError("commons-error", error.message);
      }
    });
    return button;
  });
  const list = el("ul", { class: "comments" }, ...comments.map(commentItem));
  const text = el("textarea", { id: "comment-body", required: true, maxlength: COMMENT_MAX_CHARS, rows: 3, placeholder: "Add a comment" });
  const form = el("form", { id: "comment-form" }, text, el("button", { type: "submit" }, "Comment"));
  form.addEventListener("submit", async (event) => {
    event.preventDefault();
    resetCommonsView();
    try {
      const reply = await api(`/v1/posts/${encodeURIComponent(post.id)}/comments`, { method: "POST", body: { body: text.value } });
      rememberMe(reply.comment.contributor_no);
      list.append(commentItem(reply.comment));
      count.textContent = String(reply.comment_count);
      text.value = "";
    } catch (error) {
      showError("commons-error", error.message);
    }
  });
  $("commons-post").replaceChildren(el("article", { class: "result note", id: "note-view", "data-id": post.id },
    el("h3", {}, post.title),
    el("div", { class: "meta" }, "by ", author(post.contributor_no, post.author_name), " · score ", score, " · ", count, " comments · ",
      when(post.created_at), " ", ...tagList(post.tags)),
    el("pre", {}, highlighted(post.body, terms)),
    anchors,
    el("div", { class: "votes" }, ...voteButtons),
    el("h4", {}, "comments"), list, form));
}

async function showNote(id, terms) {
  resetCommonsView();
  try {
    const [post, comments] = await Promise.all([
      api(`/v1/posts/${encodeURIComponent(id)}`),
      api(`/v1/posts/${encodeURIComponent(id)}/comments`),
    ]);
    renderNote(post, comments.comments, terms, await anchorList(post));
    $("note-view").scrollIntoView({ block: "start" });
  } catch (error) {
    showError("commons-error", error.message);
  }
}

// A note in a list (search results, recent notes): its body snipped, its title opening it.
function noteCard(note, terms) {
  const open = el("button", { type: "button" }, note.title);
  open.addEventListener("click", () => showNote(note.id, terms));
  return el("article", { class: `result note${note.hidden ? " hidden-note" : ""}`, "data-id": note.id },
    el("h3", {}, open),
    el("div", { class: "meta" }, "by ", author(note.contributor_no, note.author_name),
      ` · score ${note.score} · ${note.comment_count} comments · ${when(note.created_at)} `,
      note.hidden ? el("span", { class: "tag" }, "hidden") : null, ...tagList(note.tags)),
    el("pre", {}, highlighted(note.body, terms)),
    note.body_truncated ? el("div", { class: "truncated" }, `showing part of ${note.body_chars} characters`) : null);
}

// The recent list: its cursor and a generation, so that a page answering after the order
// changed (or the key did) is dropped instead of appended to the wrong list.
const recent = { cursor: "", generation: 0 };

async function loadRecent(more = false) {
  const generation = more ? recent.generation : ++recent.generation;
  const list = $("commons-recent");
  const button = $("recent-more");
  if (!more) {
    list.replaceChildren();
    recent.cursor = "";
  }
  showError("recent-error", "");
  button.hidden = true;
  const params = new URLSearchParams({ sort: $("recent-sort").value, limit: String(RECENT_PAGE) });
  if (more && recent.cursor) params.set("cursor", recent.cursor);
  try {
    const data = await api(`/v1/posts?${params}`);
    if (generation !== recent.generation) return;
    if (!more && !data.posts.length) list.append(el("p", { class: "state empty" }, "No notes yet."));
    for (const note of data.posts) list.append(noteCard(note, new Set()));
    recent.cursor = data.next_cursor;
    button.hidden = !data.next_cursor;
  } catch (error) {
    if (generation !== recent.generation) return;
    showError("recent-error", error.message);
  }
}

function showProfile(profile) {
  rememberMe(profile.contributor_no);
  $("me-summary").textContent = profile.display_name
    || (profile.contributor_no ? `contributor ${profile.contributor_no}` : "not set");
  $("display-name").value = profile.display_name || "";
}

async function loadProfile() {
  try {
    showProfile(await api("/v1/me"));
  } catch (error) {
    showError("commons-error", error.message);
  }
}

async function saveName(event) {
  event.preventDefault();
  resetCommonsView();
  try {
    const profile = await api("/v1/me", { method: "PUT", body: { display_name: $("display-name").value } });
    showProfile(profile);
    showState("commons-state", profile.display_name ? "Name saved." : "Name cleared.", "ok");
    loadRecent();
  } catch (error) {
    showError("commons-error", error.code === "display_name_taken"
      ? "Another contributor already has that name." : error.message);
  }
}

// The commons tab opened (or the key changed while it is shown): who this key is, and
// the newest notes.
function openCommons() {
  if (!storedKey()) return;
  loadProfile();
  loadRecent();
}

async function runCommonsSearch(event) {
  event.preventDefault();
  resetCommonsView();
  const query = $("commons-query").value;
  const results = $("commons-results");
  results.replaceChildren();
  $("commons-post").replaceChildren();
  showState("commons-state", "searching…");
  try {
    const data = await api(`/v1/search?q=${encodeURIComponent(query)}`);
    const terms = queryTerms(query);
    showState("commons-state", data.results.length ? "" : `No notes found for “${query}”.`, "empty");
    for (const note of data.results) results.append(noteCard(note, terms));
  } catch (error) {
    showState("commons-state", "");
    showError("commons-error", error.code === "semantic_search_unavailable"
      ? "Semantic search is unavailable right now (the embedder is down or slow)."
      : error.message);
  }
}

async function postNote(event) {
  event.preventDefault();
  resetCommonsView();
  const tags = $("post-tags").value.split(",").map((t) => t.trim()).filter(Boolean);
  try {
    const post = await api("/v1/posts", { method: "POST", body: { title: $("post-title").value, body: $("post-body").value, tags } });
    rememberMe(post.contributor_no);
    $("post-form").reset();
    $("commons-new").open = false;
    $("commons-results").replaceChildren();
    renderNote(post, [], new Set());
    showState("commons-state", "Posted. Search finds it once it is embedded (seconds).", "ok");
    loadRecent();
  } catch (error) {
    showError("commons-error", error.message);
  }
}

// ---- views and start-up ----

function showView(name) {
  for (const panel of ["code", "file", "refs", "commons"]) $(`panel-${panel}`).hidden = panel !== name;
  $("tab-code").setAttribute("aria-selected", String(name !== "commons"));
  $("tab-commons").setAttribute("aria-selected", String(name === "commons"));
}

function route() {
  const hash = location.hash.slice(1);
  const [view, query] = [hash.split("?")[0], hash.split("?").slice(1).join("?")];
  const params = new URLSearchParams(query);
  if (view === "file" && params.get("path")) {
    showView("file");
    showFile(params);
  } else if (view === "refs" && params.get("repo") && params.get("symbol")) {
    showView("refs");
    showReferences(params);
  } else if (view === "commons") {
    showView("commons");
    openCommons();
    if (params.get("note")) showNote(params.get("note"), queryTerms("")); // linked from beside its code
    else if (!$("commons-results").children.length && !$("commons-post").children.length && $("commons-state").hidden) {
      showState("commons-state", "Search the notes by what you are about to do, or post one.");
    }
  } else {
    showView("code");
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    $("api-key").value = "";
    if (key) useKey(key, false);
  });
  $("forget-key").addEventListener("click", () => {
    localStorage.removeItem(KEY_STORAGE);
    localStorage.removeItem(ME_STORAGE);
    setKeyStatus("no key: paste one");
    resetSources();
    $("commons-recent").replaceChildren();
    $("recent-more").hidden = true;
  });
  $("code-form").addEventListener("submit", runCodeSearch);
  $("code-repo").addEventListener("change", syncOptions);
  $("commons-form").addEventListener("submit", runCommonsSearch);
  $("post-form").addEventListener("submit", postNote);
  $("name-form").addEventListener("submit", saveName);
  $("recent-sort").addEventListener("change", () => loadRecent());
  $("recent-more").addEventListener("click", () => loadRecent(true));
  window.addEventListener("hashchange", route);
  syncOptions();
  route();
  if (storedKey()) useKey(storedKey(), true);
  else setKeyStatus("no key: paste one");
});
