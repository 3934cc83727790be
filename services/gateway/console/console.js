// The /search console: a small page over the gateway's REST API. No framework and no
// innerHTML with data: every value is put into the page as text, so nothing a result
// contains can run as script (the page's CSP forbids inline script as a second line).
"use strict";

const KEY_STORAGE = "cograph.apiKey";
const $ = (id) => document.getElementById(id);

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) {
    if (child === null || child === undefined) continue;
    node.append(child instanceof Node ? child : document.createTextNode(String(child)));
  }
  return node;
}

function showError(message) {
  const box = $("error");
  box.textContent = message;
  box.hidden = !message;
}

async function api(path, options = {}) {
  const key = localStorage.getItem(KEY_STORAGE) || "";
  const headers = { Accept: "application/json", ...(options.headers || {}) };
  if (key) headers.Authorization = `Bearer ${key}`;
  if (options.body !== undefined) headers["Content-Type"] = "application/json";
  const reply = await fetch(path, {
    method: options.method || "GET",
    headers,
    body: options.body === undefined ? undefined : JSON.stringify(options.body),
  });
  let data = null;
  try { data = await reply.json(); } catch (_) { data = null; }
  if (!reply.ok) {
    const code = (data && data.error) || `http_${reply.status}`;
    const detail = (data && data.detail) || reply.statusText;
    const error = new Error(`${code}: ${detail}`);
    error.code = code;
    throw error;
  }
  return data;
}

// ---- highlighting: split text on query terms and wrap matches in <mark> ----

function queryTerms(query) {
  const words = query.replace(/"/g, " ").split(/[^\p{L}\p{N}_]+/u).filter((w) => w.length > 1);
  // Identifier parts too, so ParseConfig also highlights "parse" and "config".
  const parts = words.flatMap((w) => w.split(/(?<=[a-z0-9])(?=[A-Z])|_/)).filter((w) => w.length > 1);
  return [...new Set([...words, ...parts].map((w) => w.toLowerCase()))];
}

function escapeRegExp(text) {
  return text.replace(/[.*+?^${}()|[\]\\]/g, "\\$&");
}

function highlighted(text, terms) {
  const fragment = document.createDocumentFragment();
  if (!terms.length) {
    fragment.append(text);
    return fragment;
  }
  const pattern = new RegExp(`(${terms.map(escapeRegExp).join("|")})`, "giu");
  let last = 0;
  for (const match of text.matchAll(pattern)) {
    if (match.index > last) fragment.append(text.slice(last, match.index));
    fragment.append(el("mark", {}, match[0]));
    last = match.index + match[0].length;
  }
  if (last < text.length) fragment.append(text.slice(last));
  return fragment;
}

// ---- key handling ----

function refreshKeyStatus() {
  const key = localStorage.getItem(KEY_STORAGE);
  $("key-status").textContent = key ? `using ${key.slice(0, 9)}…` : "no key: paste one";
}

async function loadSources() {
  const select = $("code-repo");
  try {
    const [repos, collections] = await Promise.all([api("/api/repositories"), api("/api/collections")]);
    select.replaceChildren(el("option", { value: "" }, "all readable repositories"));
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
  } catch (error) {
    if (error.code === "unauthenticated") showError(error.message);
  }
  syncLayers();
}

// A collection holds only md_collection chunks; repositories never do.
function syncLayers() {
  const collection = $("code-repo").value.startsWith("collection:");
  for (const box of $("code-layers").querySelectorAll("input")) {
    const isCollectionLayer = box.value === "md_collection";
    box.disabled = collection !== isCollectionLayer;
    if (collection) box.checked = isCollectionLayer;
    else if (isCollectionLayer) box.checked = false;
  }
}

// ---- code search ----

function isoOrNull(id) {
  const value = $(id).value;
  return value ? new Date(value).toISOString() : null;
}

function provenanceTable(provenance) {
  const table = el("table", { class: "provenance" },
    el("tr", {}, el("th", {}, "stream"), el("th", {}, "rank"), el("th", {}, "raw score")));
  for (const p of provenance || []) {
    const score = typeof p.score === "number" ? p.score.toFixed(4) : "";
    table.append(el("tr", {}, el("td", {}, p.stream), el("td", {}, p.rank), el("td", {}, score)));
  }
  return table;
}

function stagesTable(stages) {
  // Each ranking stage's effect on this result (explain): rank and score before and after.
  const table = el("table", { class: "stages" },
    el("tr", {}, el("th", {}, "stage"), el("th", {}, "rank"), el("th", {}, "score")));
  const num = (value) => (typeof value === "number" ? value.toFixed(4) : "");
  for (const s of stages) {
    const rank = s.rank_before == null ? `${s.rank_after}` : `${s.rank_before} → ${s.rank_after}`;
    const score = s.score_before == null ? num(s.score_after)
      : `${num(s.score_before)} → ${num(s.score_after)}`;
    table.append(el("tr", {}, el("td", {}, s.stage), el("td", {}, rank), el("td", {}, score)));
  }
  return table;
}

function renderExplanation(explanation) {
  const view = $("code-explain");
  view.replaceChildren();
  if (!explanation) return;
  const list = el("ol", {});
  for (const run of explanation.stages || []) {
    list.append(el("li", { class: run.applied ? "applied" : "idle" },
      el("strong", {}, run.name), ` — ${run.detail}`));
  }
  view.append(el("h2", { class: "layer" }, `ranking: ${explanation.query_class} question`), list);
}

function confidenceBadge(level) {
  // high / medium / low from the streams' evidence (README, "Confidence").
  if (!["high", "medium", "low"].includes(level)) return null;
  return el("span", { class: `confidence ${level}`, title: "confidence" }, level);
}

function codeResult(result, terms) {
  const lines = result.start_line ? `:${result.start_line}-${result.end_line}` : "";
  const where = `${result.repo ? result.repo + "/" : ""}${result.path}${lines}`;
  const meta = [result.kind, result.qualified_name, result.commit ? `@${String(result.commit).slice(0, 10)}` : null,
    typeof result.score === "number" ? `fused ${result.score.toFixed(4)}` : null]
    .filter(Boolean).join(" · ");
  return el("article", { class: "result" },
    el("div", { class: "where" }, confidenceBadge(result.confidence), where),
    el("div", { class: "meta" }, meta),
    el("pre", {}, highlighted(result.snippet || "", terms)),
    result.truncated ? el("div", { class: "truncated" }, "snippet truncated") : null,
    provenanceTable(result.provenance),
    (result.stages || []).length ? stagesTable(result.stages) : null);
}

function renderGraph(graph, results) {
  const view = $("code-graph-view");
  view.replaceChildren();
  if (!graph || !(graph.nodes || []).length) return;
  // Edges name node ids; show qualified names and where the neighbours live.
  const names = new Map();
  for (const r of results) names.set(r.id, r.qualified_name || r.path);
  for (const n of graph.nodes) names.set(n.id, n.qualified_name || n.path);
  const label = (id) => names.get(id) || id;
  const list = el("ul", {});
  for (const edge of graph.edges || []) {
    list.append(el("li", {}, `${label(edge.from)} —${edge.kind}→ ${label(edge.to)}`));
  }
  for (const node of graph.nodes) {
    list.append(el("li", { class: "meta" },
      `${node.kind} ${node.qualified_name} — ${node.path}:${node.start_line}`));
  }
  view.append(el("h2", { class: "layer" }, `graph (${graph.nodes.length} nodes)`), list);
}

async function runCodeSearch(event) {
  event.preventDefault();
  showError("");
  const query = $("code-query").value;
  const body = {
    query,
    top_k: Number($("code-top-k").value),
    snippet_chars: Number($("code-snippet").value),
    layers: [...$("code-layers").querySelectorAll("input:checked")].map((i) => i.value),
    include_graph: $("code-graph").checked,
    verbose: true, // the console shows provenance
    explain: $("code-explain-on").checked,
  };
  const source = $("code-repo").value;
  if (source.startsWith("repo:")) body.repo = source.slice("repo:".length);
  if (source.startsWith("collection:")) body.collection = source.slice("collection:".length);
  for (const [field, id] of [["since", "code-since"], ["until", "code-until"], ["as_of", "code-as-of"]]) {
    const value = isoOrNull(id);
    if (value) body[field] = value;
  }
  const results = $("code-results");
  results.replaceChildren(el("p", { class: "empty" }, "searching…"));
  try {
    const data = await api("/api/search", { method: "POST", body });
    const streams = $("code-streams");
    const reasons = (data.streams || {}).reasons || {};
    streams.replaceChildren(...Object.entries(data.streams || {})
      .filter(([name]) => name !== "reasons")
      .map(([name, state]) => el("span", { class: state === "unavailable" ? "unavailable" : "" },
        reasons[name] ? `${name}: ${state} (${reasons[name]})` : `${name}: ${state}`)));
    if (data.no_good_answer) {
      streams.append(el("span", { class: "no-good-answer" },
        "no good answer: no result is above low confidence"));
    }
    renderExplanation(data.explanation);
    const terms = queryTerms(query);
    const byLayer = new Map();
    for (const result of data.results) {
      if (!byLayer.has(result.layer)) byLayer.set(result.layer, []);
      byLayer.get(result.layer).push(result);
    }
    results.replaceChildren();
    if (!data.results.length) results.append(el("p", { class: "empty" }, "no results"));
    for (const [layer, items] of byLayer) {
      results.append(el("h2", { class: "layer" }, `${layer} (${items.length})`));
      for (const item of items) results.append(codeResult(item, terms));
    }
    renderGraph(data.graph, data.results);
  } catch (error) {
    results.replaceChildren();
    $("code-streams").replaceChildren();
    $("code-explain").replaceChildren();
    $("code-graph-view").replaceChildren();
    showError(error.message);
  }
}

// ---- commons ----

function noteMeta(note) {
  return `#${note.contributor_no} · score ${note.score} · ${note.comment_count} comments · ` +
    `${note.created_at}`;
}

async function showNote(id, terms) {
  const target = $("commons-post");
  try {
    const [post, comments] = await Promise.all([
      api(`/v1/posts/${encodeURIComponent(id)}`),
      api(`/v1/posts/${encodeURIComponent(id)}/comments`),
    ]);
    const list = el("ul", {});
    for (const c of comments.comments) list.append(el("li", {}, `#${c.contributor_no}: `, c.body));
    target.replaceChildren(el("article", { class: "result note" },
      el("h3", {}, post.title), el("div", { class: "meta" }, noteMeta(post)),
      el("pre", {}, highlighted(post.body, terms)), list));
  } catch (error) {
    showError(error.message);
  }
}

async function runCommonsSearch(event) {
  event.preventDefault();
  showError("");
  const query = $("commons-query").value;
  const results = $("commons-results");
  results.replaceChildren(el("p", { class: "empty" }, "searching…"));
  $("commons-post").replaceChildren();
  try {
    const data = await api(`/v1/search?q=${encodeURIComponent(query)}`);
    const terms = queryTerms(query);
    results.replaceChildren();
    if (!data.results.length) results.append(el("p", { class: "empty" }, "no notes found"));
    for (const note of data.results) {
      const open = el("button", { type: "button" }, note.title);
      open.addEventListener("click", () => showNote(note.id, terms));
      results.append(el("article", { class: "result note" },
        el("h3", {}, open),
        el("div", { class: "meta" }, noteMeta(note), " ",
          ...note.tags.map((t) => el("span", { class: "tag" }, t))),
        el("pre", {}, highlighted(note.body, terms)),
        note.body_truncated ? el("div", { class: "truncated" },
          `showing part of ${note.body_chars} characters`) : null));
    }
  } catch (error) {
    results.replaceChildren();
    showError(error.code === "semantic_search_unavailable"
      ? "Semantic search is unavailable right now (the embedder is down or slow)."
      : error.message);
  }
}

// ---- tabs and start-up ----

function selectTab(name) {
  for (const tab of ["code", "commons"]) {
    $(`tab-${tab}`).setAttribute("aria-selected", String(tab === name));
    $(`panel-${tab}`).hidden = tab !== name;
  }
}

document.addEventListener("DOMContentLoaded", () => {
  $("key-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const key = $("api-key").value.trim();
    if (key) localStorage.setItem(KEY_STORAGE, key);
    $("api-key").value = "";
    refreshKeyStatus();
    showError("");
    loadSources();
  });
  $("forget-key").addEventListener("click", () => {
    localStorage.removeItem(KEY_STORAGE);
    refreshKeyStatus();
  });
  $("tab-code").addEventListener("click", () => selectTab("code"));
  $("tab-commons").addEventListener("click", () => selectTab("commons"));
  $("code-form").addEventListener("submit", runCodeSearch);
  $("code-repo").addEventListener("change", syncLayers);
  $("commons-form").addEventListener("submit", runCommonsSearch);
  refreshKeyStatus();
  if (localStorage.getItem(KEY_STORAGE)) loadSources();
});
