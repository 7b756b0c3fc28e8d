// The Dormant dashboard: one page over the API's own routes (see dormant/http/ui.py). Everything from the
// server is inserted as text, never as HTML.
import { lanesView } from "./lanes.js";

import { subscribe } from "./realtime.js";

const STATUSES = ["pending", "sleeping", "completed", "failed", "diverged", "rolling_back", "paused", "terminated"];
const ATTENTION = {
  failed: "failed", diverged: "diverged", rolling_back: "rolling back", retrying: "retrying",
  wake_error: "wake-up failed",
};
const REFRESH_MS = 1500; // status poll of an open actor; the rest is read again only when its version moves
const EVENTS_MS = 2000; // events poll: short requests, never a held long-poll (see followEvents)
const session = {
  token: sessionStorage.getItem("dormant-token") || "",
  dev: false,
  pushed: false,  // events over the dev stack's WebSocket API (config.json says when it serves one)
  generation: 0,
  openapi: null,
};

class ApiError extends Error {
  constructor(status, code, message, detail) {
    super(message);
    this.status = status;
    this.code = code;
    this.detail = detail;
  }
}

// An actor key as the CLI shows it and every command takes it back (dormant.cli.common.key_text): parts joined by
// ',', and inside a part each ',', '~', whitespace and invisible character written ~XX (its UTF-8 bytes), a
// leading '-' too, and a part '.' or '..' as ~2E: ["sales,emea"] is sales~2Cemea, ["sales", "emea"] sales,emea.
function keyText(parts) {
  const escape = (ch) => Array.from(new TextEncoder().encode(ch), (b) => "~" + b.toString(16).toUpperCase()
    .padStart(2, "0")).join("");
  return parts.map((part, index) => {
    if (part === "." || part === "..") return "~2E".repeat(part.length);
    let text = Array.from(part, (ch) => (ch === "," || ch === "~" || /[\p{C}\p{Z}]/u.test(ch) ? escape(ch) : ch))
      .join("");
    if (index === 0 && text.startsWith("-")) text = "~2D" + text.slice(1);
    return text;
  }).join(",");
}

function el(tag, attrs = {}, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value === undefined || value === null || value === false) continue;
    if (name === "text") node.textContent = value;
    else if (name.startsWith("on")) node.addEventListener(name.slice(2), value);
    else node.setAttribute(name, value === true ? "" : value);
  }
  for (const child of children.flat()) {
    if (child !== undefined && child !== null) node.append(child instanceof Node ? child : String(child));
  }
  return node;
}

// The page authenticates as the API does: under `dormant dev` not at all; deployed, the operator token in its own
// header, so that Authorization stays free for the caller's credentials: in iam or jwt mode a proxy in front of the
// page adds them (a SigV4 signature, a JWT), as API Gateway needs on every route, the page's own too.
function headers() {
  return session.token ? { "X-Dormant-Operator-Token": session.token } : {};
}

async function api(method, path, body) {
  const init = { method, headers: headers() };
  if (body !== undefined) {
    init.headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = data && data.error ? data.error : { code: "http_error", message: response.statusText };
    if (response.status === 401 && !session.dev) document.getElementById("token-form").hidden = false;
    throw new ApiError(response.status, error.code, error.message, error.detail);
  }
  return data;
}

function explain(error) {
  const details = Array.isArray(error.detail)
    ? error.detail.map((d) => `${(d.loc || []).join(".")}: ${d.msg}`).filter(Boolean) : [];
  return [error.message, ...details].join("\n");
}

function flash(text, kind = "ok") {
  const box = document.getElementById("flash");
  box.textContent = text;
  box.className = kind;
  box.hidden = false;
}

function stamp(seconds) {
  return new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 23) + " UTC";
}

function when(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const delta = seconds - Date.now() / 1000;
  return `${stamp(seconds).slice(0, 19)} UTC (${delta >= 0 ? "in " + span(delta) : span(-delta) + " ago"})`;
}

function span(seconds) {
  if (seconds < 1) return `${Math.round(seconds * 1000)} ms`;
  if (seconds < 60) return `${seconds.toFixed(1)} s`;
  if (seconds < 3600) return `${Math.floor(seconds / 60)}m ${Math.floor(seconds % 60)}s`;
  if (seconds < 172800) return `${Math.floor(seconds / 3600)}h ${Math.floor((seconds % 3600) / 60)}m`;
  return `${Math.floor(seconds / 86400)}d ${Math.floor((seconds % 86400) / 3600)}h`;
}

function short(value, limit = 80) {
  const text = JSON.stringify(value) ?? "null";
  return text.length <= limit ? text : text.slice(0, limit - 1) + "…";
}

// A value whose JSON passes LARGE characters is shown collapsed (its size in the summary), its text written only
// once it is opened, in a box that scrolls both ways: a state of megabytes never widens or stalls the page.
const LARGE = 4096;

function sizeText(characters) {
  return characters < 1e6 ? `${(characters / 1e3).toFixed(1)} KB` : `${(characters / 1e6).toFixed(1)} MB`;
}

function valueView(value, label = "value") {
  const text = JSON.stringify(value, null, 2) ?? "null";
  if (text.length <= LARGE) return el("pre", { class: "value-text", text });
  const box = el("pre", { class: "value-text" });
  const view = el("details", { class: "large-value", "data-size": String(text.length),
    ontoggle: () => { if (view.open && !box.textContent) box.textContent = text; } },
  el("summary", { text: `${label}: ${sizeText(text.length)} of JSON (collapsed; open to show it in a scrolling box)` }),
  box);
  return view;
}

function statusBadge(state) {
  return el("span", { class: `status ${state}`, text: state });
}

function waitsFor(status) {
  const waits = status.waiting_for || {};
  switch (status.workflow) {
    case "sleeping": {
      const parts = [];
      const queued = waits.queues && waits.queues.length;
      const limits = waits.limits || [];
      if (queued) parts.push(`a message on ${waits.queues.join(", ")}`);
      if (limits.length) {
        const retry = waits.deadline && !queued ? ` (next try ${when(waits.deadline)}, or when a slot frees)` : "";
        parts.push(`${limits.length === 1 ? "limit" : "limits"} ${limits.join(", ")}${retry}`);
      }
      if (waits.deadline && (queued || !limits.length)) parts.push(`${queued ? "its deadline" : "a timer"}: ${when(waits.deadline)}`);
      if (waits.retry_at) parts.push(`a retry at ${when(waits.retry_at)}`);
      if (waits.callbacks && waits.callbacks.length) {
        parts.push(`the outside system: callback ${waits.callbacks.map((c) => c.name).join(", ")}`);
      }
      return parts.length ? "waits for " + parts.join(" or ") : "a wake-up is due";
    }
    case "pending": return "created; its first wake-up is on its way";
    case "running": return "a wake-up is running it";
    case "completed": return `finished: ${short(status.output)}`;
    case "rolling_back": return "compensating" + (waits.retry_at ? `; next try ${when(waits.retry_at)}` : "");
    case "paused": return status.paused ? `${noteText(status.paused)}; it was ${status.paused.previous || "sleeping"}`
      + ": no wake-up runs it until Unpause (messages sent meanwhile wait, its timers keep their time)" : "paused";
    default: return (status.error || "").split("\n")[0];
  }
}

// An operator's action kept on the record (a pause, a reset, the fork that made the actor): what, who, why, when.
function noteText(note) {
  const what = note.action === "pause" ? "paused" : note.detail || note.action;
  return `${what} by ${note.by || "the application"}${note.reason ? ` (${note.reason})` : ""}, ${when(note.at)}`;
}

// A key typed as in URLs (parts joined by ",", other characters ~XX: dormant.http.keys) -> its parts.
function decodeKey(text) {
  return text.split(",").map((part) => {
    if (!part) throw new Error("a key part is empty (two commas in a row, or one at an end)");
    const bytes = [];
    for (let i = 0; i < part.length; i += 1) {
      if (part[i] === "~") {
        const pair = part.slice(i + 1, i + 3);
        if (!/^[0-9a-fA-F]{2}$/.test(pair)) throw new Error("'~' must be followed by two hex digits");
        bytes.push(parseInt(pair, 16));
        i += 2;
      } else {
        bytes.push(...new TextEncoder().encode(part[i]));
      }
    }
    return new TextDecoder("utf-8", { fatal: true }).decode(new Uint8Array(bytes));
  });
}

function versionsTable(kept, onFork, onReset, onShow) {
  const rows = kept.versions.slice().reverse().map((v) => el("tr", { "data-version": String(v.version) },
    el("td", { text: String(v.version) }), el("td", { text: when(v.committed_at) }),
    el("td", {}, statusBadge(v.status)), el("td", { text: String(v.entries) }),
    el("td", { text: v.received === null ? "-" : String(v.received.length) }),
    el("td", { class: "detail-cell", text: v.changed === null ? "(its commit is not kept)"
      : (v.changed.join(", ") || "-") + (v.more_changed ? ` (+${v.more_changed} more)` : "") }),
    el("td", {}, el("button", { class: "show-version", text: "show", onclick: () => onShow(v.version) }),
      el("button", { class: "fork", text: "fork…", onclick: () => onFork(v.version) }),
      el("button", { class: "reset danger", text: "reset to", onclick: () => onReset(v.version) }))));
  return table("versions", ["version", "committed", "status", "entries", "received", "changed", ""], rows);
}

// What to do next comes with the status (`advice`, and `remedies`: the actions that apply), from the rule resume
// follows (dormant.runtime.remedies): the page never offers what the API would refuse.
const HINTS = { terminated: "terminated by an operator: it takes no more messages" };

function actorPath(name, segment) {
  return `actors/${encodeURIComponent(name)}/${segment}`;
}

function actorLink(name, segment, text) {
  return el("a", { href: `#/actor/${encodeURIComponent(name)}/${segment}`, text });
}

function fill(node, ...children) {  // replaceChildren, leaving out what is not there (it would print "null")
  node.replaceChildren(...children.flat().filter((child) => child !== null && child !== undefined && child !== false));
}

function table(id, columns, rows) {
  return el("table", { id }, el("thead", {}, el("tr", {}, columns.map((h) => el("th", { text: h })))),
    el("tbody", {}, rows));
}

// -- the home page: what needs an operator, then every type with its counts per status ------------------------
async function typesView(view) {
  const types = await api("GET", "actors");
  const perType = await Promise.all(types.map(async (t) => {
    const [counts, attention] = await Promise.all([
      api("GET", `actors/${encodeURIComponent(t.name)}/counts`).catch((error) => error),
      t.workflow ? api("GET", `actors/${encodeURIComponent(t.name)}/attention`).catch((error) => error) : null]);
    return { type: t, counts, attention };
  }));
  const refused = perType.map((p) => [p.counts, p.attention]).flat().find((r) => r instanceof ApiError);
  const order = Object.keys(ATTENTION);
  const needing = perType.filter((p) => p.attention && !(p.attention instanceof ApiError))
    .flatMap((p) => p.attention.actors)
    .sort((a, b) => order.indexOf(a.reason) - order.indexOf(b.reason));
  const truncated = perType.some((p) => p.attention && p.attention.truncated);
  const rows = needing.map((actor) => {
    const detail = el("td", { class: "detail-cell", text: actor.detail || "…" });
    if (!actor.detail) {  // failed and diverged come from the listing: their error is on their status
      api("GET", `${actorPath(actor.name, actor.segment)}/status`)
        .then((found) => { detail.textContent = (found.error || waitsFor(found)).split("\n")[0]; })
        .catch((error) => { detail.textContent = error.message; });
    }
    return el("tr", { "data-type": actor.name, "data-key": actor.key.join(","), "data-reason": actor.reason },
      el("td", { text: actor.name }), el("td", {}, actorLink(actor.name, actor.segment, keyText(actor.key))),
      el("td", {}, el("span", { class: `status ${actor.reason}`, text: ATTENTION[actor.reason] })),
      el("td", { text: when(actor.since) }), detail);
  });
  const typeRows = perType.map(({ type, counts }) => el("tr", { "data-type": type.name },
    el("td", {}, el("a", { class: "type-link", href: `#/type/${encodeURIComponent(type.name)}`, text: type.name })),
    STATUSES.map((status) => {
      if (!counts || counts instanceof ApiError) return el("td", { class: "muted", text: "-" });
      const found = counts.counts[status] || { count: 0, exact: true };
      const text = `${found.count}${found.exact ? "" : "+"}`;
      return el("td", { "data-status": status, class: found.count ? `count ${status}` : "count muted" },
        found.count ? el("a", { href: `#/type/${encodeURIComponent(type.name)}?status=${status}`, text }) : text);
    }),
    el("td", { text: type.queues.join(", ") || "-" }),
    el("td", { text: type.actions.join(", ") || "-" }),
    el("td", { class: "search-names", text: Object.keys(type.search || {}).join(", ") || "-" })));
  const select = el("select", { id: "open-type" }, types.map((t) => el("option", { value: t.name, text: t.name })));
  const key = el("input", { id: "open-key", placeholder: "key as in URLs (main, tenant,42)", required: true });
  fill(view,
    el("h1", { text: "Needs an operator" }),
    refused ? el("p", { id: "counts-refused", class: "muted", text: `counts and attention: ${refused.message}` }) : null,
    rows.length ? table("attention", ["type", "key", "why", "since", "detail"], rows)
      : el("p", { id: "no-attention", class: "muted", text: refused ? "-" : "nothing needs an operator" }),
    truncated ? el("p", { class: "muted", text: "more are listed per type and status below" }) : null,
    el("h2", { text: "Actor types" }),
    table("types", ["type", ...STATUSES, "queues", "actions", "search attributes"], typeRows),
    el("h2", { text: "Open an actor" }),
    el("form", { class: "toolbar", onsubmit: (event) => {
      event.preventDefault();
      location.hash = `#/actor/${encodeURIComponent(select.value)}/${key.value.trim()}`;
    } }, select, key, el("button", { type: "submit", text: "open" })));
}

// -- a type's actors, by status, or found by their search attributes ------------------------------------------------
const SEARCH_OPERATORS = {
  str: ["=", "^=", "<", "<=", ">", ">="], int: ["=", "<", "<=", ">", ">="], float: ["=", "<", "<=", ">", ">="],
  datetime: ["=", "<", "<=", ">", ">="], bool: ["="],
};
const OPERATOR_WORDS = { "=": "=", "^=": "starts with", "<": "<", "<=": "≤", ">": ">", ">=": "≥" };
const SEARCH_HINTS = { str: "text", int: "e.g. 100", float: "e.g. 12.5", bool: "true or false",
  datetime: "e.g. 2026-01-31T12:00:00Z" };
const CONDITION = /^([A-Za-z_][A-Za-z0-9_]*)(<=|>=|\^=|=|<|>)(.*)$/s;

function listHash(name, status, where, cursor) {
  const query = new URLSearchParams();
  if (status) query.set("status", status);
  for (const condition of where) query.append("where", condition);
  if (cursor) query.set("cursor", cursor);
  const text = query.toString();
  return `#/type/${encodeURIComponent(name)}` + (text ? `?${text}` : "");
}

function attributeText(value) {
  return typeof value === "string" ? value : JSON.stringify(value);
}

// The conditions as rows (attribute, operator, value); the API reads them (`where`), and refuses what it cannot.
function searchForm(name, declared, status, where) {
  const rows = el("div", { id: "where-rows" });
  const addRow = (text) => {
    const found = CONDITION.exec(text);
    const attribute = el("select", { class: "where-attribute", "aria-label": "search attribute" },
      Object.entries(declared).map(([n, type]) => el("option", { value: n, text: `${n} (${type})` })));
    const operator = el("select", { class: "where-op", "aria-label": "operator" });
    const value = el("input", { class: "where-value", "aria-label": "value" });
    const operators = () => {
      const type = declared[attribute.value];
      operator.replaceChildren(...SEARCH_OPERATORS[type].map((op) => el("option", { value: op, text: OPERATOR_WORDS[op] })));
      value.placeholder = SEARCH_HINTS[type];
    };
    attribute.addEventListener("change", operators);
    if (found && declared[found[1]]) attribute.value = found[1];
    operators();
    if (found && declared[found[1]]) {
      operator.value = found[2];
      value.value = found[3];
    }
    const row = el("div", { class: "where-row" }, attribute, operator, value,
      el("button", { type: "button", class: "where-remove", title: "remove this condition", text: "✕",
        onclick: () => row.remove() }));
    rows.append(row);
  };
  (where.length ? where : [""]).forEach(addRow);
  return el("form", { id: "where-form", class: "where", onsubmit: (event) => {
    event.preventDefault();
    const conditions = [...rows.querySelectorAll(".where-row")]
      .map((row) => [row.querySelector(".where-attribute").value, row.querySelector(".where-op").value,
        row.querySelector(".where-value").value])
      .filter(([, , value]) => value !== "")  // a row left empty is no condition
      .map((parts) => parts.join(""));
    location.hash = listHash(name, status, conditions);
  } },
  el("span", { class: "muted", text: "find by search attributes (all must hold)" }), rows,
  el("div", { class: "where-foot" },
    el("button", { type: "button", id: "where-add", text: "+ condition", onclick: () => addRow("") }),
    el("button", { type: "submit", id: "where-search", class: "primary", text: "search" }),
    where.length ? el("a", { id: "where-clear", href: listHash(name, status, []), text: "clear" }) : null));
}

function matchCounts(name, where, counts) {
  if (counts === null) return null;
  if (counts instanceof ApiError) return el("p", { id: "where-counts", class: "muted", text: `counts: ${counts.message}` });
  const found = STATUSES.filter((status) => counts.counts[status] && counts.counts[status].count);
  if (!found.length) return el("p", { id: "where-counts", class: "muted", text: "no actor matches" });
  return el("p", { id: "where-counts" }, "matches: ", found.flatMap((status, index) => {
    const count = counts.counts[status];
    return [index ? " · " : "", el("a", { href: listHash(name, status, where), "data-status": status,
      text: `${count.count}${count.exact ? "" : "+"} ${status}` })];
  }));
}

async function listView(view, name, params) {
  const status = params.get("status") || "";
  const cursor = params.get("cursor") || "";
  const where = params.getAll("where");
  const query = new URLSearchParams({ limit: "20" });
  if (status) query.set("status", status);
  if (cursor) query.set("cursor", cursor);
  const conditions = new URLSearchParams();
  for (const condition of where) conditions.append("where", condition);
  const types = await api("GET", "actors");
  const declared = (types.find((t) => t.name === name) || {}).search || {};
  const [page, counts] = await Promise.all([
    api("GET", `actors/${encodeURIComponent(name)}?${query}${where.length ? "&" + conditions : ""}`)
      .catch((error) => error),
    where.length ? api("GET", `actors/${encodeURIComponent(name)}/counts?${conditions}`).catch((error) => error) : null]);
  if (page instanceof ApiError && page.code !== "invalid_where") throw page;
  const filter = el("select", { id: "status-filter", onchange: () => { location.hash = listHash(name, filter.value, where); } },
    el("option", { value: "", text: "any status" }), STATUSES.map((s) => el("option", { value: s, text: s })));
  filter.value = status;
  const searching = where.length > 0;
  const names = searching ? Object.keys(declared) : [];
  const rows = page instanceof ApiError ? [] : page.actors.map((actor) => {
    const waits = el("td", { class: "waits muted", text: "…" });
    api("GET", `${actorPath(name, actor.segment)}/status`).then((found) => { waits.textContent = waitsFor(found); })
      .catch((error) => { waits.textContent = error.message; });
    const values = actor.attributes || {};
    return el("tr", { "data-key": actor.key.join(",") },
      el("td", {}, actorLink(name, actor.segment, keyText(actor.key))),
      el("td", {}, statusBadge(actor.status)), el("td", { text: when(actor.since) }),
      searching ? null : el("td", { text: String(actor.version) }),
      names.map((n) => el("td", { "data-attribute": n, text: n in values ? attributeText(values[n]) : "-" })), waits);
  });
  const next = page instanceof ApiError || !page.cursor ? null
    : el("a", { id: "next-page", href: listHash(name, status, where, page.cursor), text: "next page →" });
  const columns = ["key", "status", "since", ...(searching ? names : ["version"]), "what it waits for"];
  fill(view,
    el("h1", {}, `${name}: actors`),
    Object.keys(declared).length ? searchForm(name, declared, status, where) : null,
    el("div", { class: "toolbar" }, el("label", {}, "status ", filter), next),
    page instanceof ApiError ? el("p", { id: "where-error", class: "status failed", text: page.message }) : null,
    searching && !(page instanceof ApiError) ? matchCounts(name, where, counts) : null,
    page instanceof ApiError ? null : rows.length ? table("actors", columns, rows)
      : el("p", { id: "no-actors", class: "muted", text: (searching ? "no actors match" : "no actors")
        + (status ? ` in status ${status}` : "") }));
}

// -- one actor's history ------------------------------------------------------------------------------------
function stepDuration(entry) {
  if (entry.started_at !== undefined && entry.started_at !== null && entry.ended_at !== undefined
      && entry.ended_at !== null) return entry.ended_at - entry.started_at;
  // recorded before steps kept their attempts' times: created..updated is the run only for a first attempt
  return entry.attempts <= 1 ? entry.updated_at - entry.created_at : null;
}

const ITEM_OUTCOME = { completed: "succeeded", failed: "failed", cancelled: "cancelled", pending: "in flight" };

function entryLabel(entry, items) {
  const parts = [];
  switch (entry.kind) {
    case "step": {
      parts.push(`step ${entry.name}`);
      const took = stepDuration(entry);
      if (entry.status === "completed") parts.push(`→ ${short(entry.output)}` + (took !== null ? ` in ${span(took)}` : ""));
      if (entry.attempts > 1) parts.push(`(${entry.attempts} attempts)`);
      if (entry.retry_at) parts.push(`retry at ${when(entry.retry_at)}`);
      if (entry.throttled_since) parts.push(`waits for its limit since ${when(entry.throttled_since)}`);
      if (entry.rollback_done) parts.push("— undone by its rollback handler");
      else if (entry.rollback_error) parts.push(`— its rollback failed: ${entry.rollback_error.message}`);
      break;
    }
    case "loop": parts.push(`loop ${entry.name}: iteration ${entry.iteration}`); break;
    case "sleep": parts.push(`sleep ${entry.name} until ${when(entry.deadline)}`); break;
    case "message":
      parts.push(`wait ${entry.name}: ` + (entry.timed_out ? "timed out" : entry.messages.length
        ? "received " + entry.messages.map((m) => `${m.name} ${short(m.body, 60)}`).join("; ") : "waiting"));
      break;
    case "callback": {
      const outcome = (entry.callback || {}).outcome;
      parts.push(`callback ${entry.name}: ` + (outcome === "completed" ? `→ ${short(entry.output)}`
        : outcome ? outcome.replaceAll("_", " ") : "open") + (!outcome && entry.deadline ? `, times out ${when(entry.deadline)}` : ""));
      break;
    }
    case "join": case "race":
      parts.push(`${entry.kind} ${entry.name} ${entry.status}: ` + Object.entries(entry.branches || {}).map(
        ([b, r]) => `${b} ${r.status}`).join(", ") + (entry.winner ? `, winner ${entry.winner}` : ""));
      break;
    case "map": {  // with how its items stand, from their entries (`items`: this map's item entries)
      const count = (entry.items || []).length;
      const outcomes = {};
      for (const item of items || []) {
        const outcome = ITEM_OUTCOME[item.status] || item.status;
        outcomes[outcome] = (outcomes[outcome] || 0) + 1;
      }
      if (count > (items || []).length) outcomes["not started"] = count - (items || []).length;
      const counted = Object.entries(outcomes).map(([what, n]) => `${n} ${what}`).join(", ");
      parts.push(`map ${entry.name} ${entry.status}: ${count} item${count === 1 ? "" : "s"}` + (counted ? `, ${counted}` : ""));
      break;
    }
    case "map_item":
      parts.push(`item ${entry.name} ` + (ITEM_OUTCOME[entry.status] || entry.status)
        + (entry.status === "completed" ? ` → ${short(entry.output)}` : ""));
      break;
    default: parts.push(`${entry.kind} ${entry.name}`);
  }
  return parts.join(" ");
}

function clock(seconds) {  // the time of day, to the millisecond (the full stamp is in the element's title)
  return stamp(seconds).slice(11, 23);
}

function entryTimes(entry) {
  const parts = [`recorded ${clock(entry.created_at)}`];
  const full = [`recorded ${stamp(entry.created_at)}`];
  if (entry.kind === "step" && entry.started_at) {
    const took = stepDuration(entry);
    parts.push(`last attempt ${clock(entry.started_at)}` + (took !== null ? `, ran ${span(took)}` : ""));
    full.push(`last attempt started ${stamp(entry.started_at)}`);
  }
  if (entry.updated_at && entry.updated_at !== entry.created_at) {
    parts.push(`updated ${clock(entry.updated_at)}`);
    full.push(`updated ${stamp(entry.updated_at)}`);
  }
  return el("span", { class: "times", title: full.join("\n"), text: parts.join(" · ") });
}

function entryValues(entry) {
  const values = [];
  switch (entry.kind) {
    case "step": if (entry.status === "completed") values.push(["result", entry.output]); break;
    case "loop":
      if (entry.loop_state !== undefined && entry.loop_state !== null) values.push(["state", entry.loop_state]);
      if (entry.status === "completed") values.push(["result", entry.output]);
      break;
    case "message":
      if (entry.messages.length) values.push(["received", entry.messages.map((m) => ({
        id: m.id, queue: m.name, body: m.body, sent: stamp(m.created_at),
        from: m.sender ? `${m.sender.kind}:${m.sender.id}` : null }))]);
      break;
    case "join": case "race": values.push(["branches", entry.branches]); break;
    case "map": values.push(["items", entry.items || []]); break;
    case "map_item": if (entry.status === "completed") values.push(["result", entry.output]); break;
    case "callback": if (entry.status === "completed") values.push(["result", entry.output]); break;
    default: break;
  }
  return values;
}

function timeline(entries, open) {
  const mapItems = {};  // map location -> its item entries
  for (const entry of entries) {
    if (entry.kind !== "map_item") continue;
    const map = entry.location.slice(0, entry.location.lastIndexOf("/"));
    (mapItems[map] = mapItems[map] || []).push(entry);
  }
  return el("ol", { id: "timeline", class: "timeline" }, entries.slice().sort((a, b) => a.seq - b.seq).map((entry) => {
    const depth = entry.location.split("/").length - 1;
    const item = el("li", { class: entry.rollback_done ? `${entry.status} undone` : entry.status,
      "data-location": entry.location },
      el("span", { class: "label", text: entryLabel(entry, mapItems[entry.location]) }),
      el("span", { class: "detail", text: entry.location }),
      entryTimes(entry));
    item.style.marginLeft = `${depth * 1.2}rem`;  // through CSSOM: the page's CSP forbids inline style attributes
    if (entry.error) item.append(el("span", { class: "error", text: `${entry.error.type}: ${entry.error.message}` }));
    for (const [label, value] of entryValues(entry)) {
      const id = `${entry.location}#${label}`;
      const view = valueView(value, label);
      if (view.tagName === "DETAILS") {  // a large value: collapsed already, under its own summary
        view.classList.add("value");
        view.dataset.value = id;
        view.open = open.has(id);
        item.append(view);
      } else {
        item.append(el("details", { class: "value", "data-value": id, open: open.has(id) },
          el("summary", { text: label }), view));
      }
    }
    return item;
  }));
}

function inboxTable(inbox) {
  if (!inbox.messages.length) return el("p", { id: "no-inbox", class: "muted", text: "no messages waiting" });
  const rows = inbox.messages.map((m) => el("tr", { "data-id": m.id },
    el("td", { text: m.id }), el("td", { text: m.kind === "queue" ? m.queue
      : m.kind === "callback" ? `${m.queue} (callback completion)` : `${m.queue} (scheduled action)` }),
    el("td", { text: when(m.created_at) }), el("td", { text: m.not_before ? when(m.not_before) : "-" }),
    el("td", { text: m.sender || "-" }), el("td", { text: String(m.bytes) }),
    el("td", {}, el("code", { text: m.preview + (m.truncated ? "…" : "") }))));
  return el("div", {}, table("inbox", ["id", "queue", "sent", "due", "from", "bytes", "body"], rows),
    inbox.total > inbox.messages.length ? el("p", { class: "muted", text: `${inbox.total} waiting in all` }) : null);
}

// Open callbacks (ctx.callback): their deadlines; under `dormant dev` their tokens too (the API shows tokens only
// there), with a form that posts the outside system's completion, failure or heartbeat.
function callbacksCard(waiting, entries, done, drafts) {
  if (!waiting.length) return el("p", { id: "no-callbacks", class: "muted", text: "no open callbacks" });
  const tokens = new Map(entries.filter((e) => e.callback).map((e) => [e.location, e.callback.token]));
  const rows = waiting.map((c) => {
    const token = session.dev ? tokens.get(c.location) : null;
    const cells = [el("td", { text: c.name }), el("td", { text: c.location }), el("td", { text: when(c.deadline) }),
      el("td", { text: c.heartbeat_deadline ? when(c.heartbeat_deadline) : "-" })];
    if (session.dev) {
      // what was typed survives the card being drawn again (a refresh, a refused post)
      const result = el("textarea", { class: "callback-result", rows: 2, text: drafts.get(c.location) ?? "null",
        oninput: (event) => drafts.set(c.location, event.target.value) });
      const post = (body, label) => async () => {
        try {
          const found = await api("POST", `callbacks/${token}`, body());
          flash(`callback ${c.name}: ${label} → ${found.status}`);
        } catch (error) {
          flash(`callback ${c.name}: ${label} refused: ${explain(error)}`, "error");
        }
        await done();
      };
      cells.push(el("td", {}, token ? el("code", { class: "callback-token", text: token }) : "-"),
        el("td", {}, result,
          el("button", { class: "callback-complete", text: "complete", onclick: post(() => {
            try { return { result: JSON.parse(result.value) }; } catch { throw new ApiError(400, "invalid_json", "the result is not JSON"); }
          }, "complete") }),
          el("button", { class: "callback-fail", text: "fail", onclick: post(() => ({
            error: { type: "FailedFromDashboard", message: "failed from the dashboard" } }), "fail") }),
          el("button", { class: "callback-heartbeat", text: "heartbeat", onclick: post(() => ({ heartbeat: true }), "heartbeat") })));
    }
    return el("tr", { "data-callback": c.location }, cells);
  });
  const columns = ["callback", "location", "times out", "heartbeat due", ...(session.dev ? ["token", "as the outside system"] : [])];
  return table("callbacks", columns, rows);
}

// -- forms to send a message or call an action, from the OpenAPI document's schemas -------------------------
async function openapi() {
  if (session.openapi === null) session.openapi = await api("GET", "openapi.json").catch(() => ({ paths: {} }));
  return session.openapi;
}

function resolve(document, schema) {
  let found = schema || {};
  for (let hops = 0; found.$ref && hops < 20; hops += 1) {
    found = found.$ref.replace(/^#\//, "").split("/").reduce((node, part) => (node || {})[part], document) || {};
  }
  return found;
}

function example(document, schema, depth = 0) {
  const found = resolve(document, schema);
  if (depth > 6) return null;
  if (found.default !== undefined) return found.default;
  if (found.examples && found.examples.length) return found.examples[0];
  if (found.enum && found.enum.length) return found.enum[0];
  const choices = found.anyOf || found.oneOf;
  if (choices) return example(document, choices.find((c) => resolve(document, c).type !== "null") || choices[0], depth + 1);
  switch (found.type) {
    case "object": {
      const value = {};
      for (const [name, property] of Object.entries(found.properties || {})) value[name] = example(document, property, depth + 1);
      return value;
    }
    case "array":
      return (found.prefixItems || []).map((item) => example(document, item, depth + 1));
    case "string": return "";
    case "integer": case "number": return found.minimum ?? found.exclusiveMinimum ?? 0;
    case "boolean": return false;
    default: return null;
  }
}

function bodySchema(document, path) {
  const operation = ((document.paths || {})[path] || {}).post;
  const content = operation && operation.requestBody && operation.requestBody.content;
  return content && content["application/json"] ? content["application/json"].schema : null;
}

function jsonForm(kind, target, schema, document, submit) {
  const text = el("textarea", { name: "body", rows: "3", spellcheck: "false", "aria-label": `${kind} ${target}` });
  text.value = JSON.stringify(schema ? example(document, schema) : kind === "call" ? [] : {}, null, 1);
  const wait = kind === "send" ? el("input", { type: "checkbox", name: "wait" }) : null;
  const form = el("form", { class: `json-form ${kind}`, [`data-${kind === "send" ? "queue" : "action"}`]: target,
    onsubmit: async (event) => {
      event.preventDefault();
      let value;
      try {
        value = JSON.parse(text.value);
      } catch (error) {
        flash(`${kind} ${target}: the body is not valid JSON (${error.message})`, "error");
        return;
      }
      await submit(value, wait ? wait.checked : false);
    } },
  el("div", { class: "form-head" }, el("strong", { text: target }),
    schema ? el("details", { class: "schema" }, el("summary", { text: "schema" }),
      el("pre", { text: JSON.stringify(resolve(document, schema), null, 1) })) : null),
  text,
  el("div", { class: "form-foot" }, wait ? el("label", {}, wait, " wait for its response") : null,
    el("button", { type: "submit", text: kind === "send" ? "send" : "call" })));
  return form;
}

async function forms(name, base, definition, done) {
  const document = await openapi();
  const prefix = `/actors/${name}/{key}`;
  const sends = definition.queues.map((queue) => jsonForm("send", queue, bodySchema(document, `${prefix}/queues/${queue}`),
    document, async (body, wait) => {
      try {
        const result = await api("POST", `${base}/queues/${encodeURIComponent(queue)}${wait ? "?wait=true" : ""}`, body);
        flash(`send ${queue}: ${result.status} (message ${result.id})` + (result.response !== undefined
          ? ` → ${short(result.response, 200)}` : "") + (result.workflow ? `; the actor is ${result.workflow}` : ""));
      } catch (error) {
        flash(`send ${queue} refused: ${explain(error)}`, "error");
      }
      await done();
    }));
  const calls = definition.actions.map((action) => jsonForm("call", action, bodySchema(document, `${prefix}/actions/${action}`),
    document, async (args) => {
      try {
        const result = await api("POST", `${base}/actions/${encodeURIComponent(action)}`, args);
        flash(`call ${action} → ${short(result.result, 300)}`);
      } catch (error) {
        flash(`call ${action} refused: ${explain(error)}`, "error");
      }
      await done();
    }));
  return [
    el("h2", { text: "send a message" }),
    sends.length ? el("div", { id: "send-forms" }, sends) : el("p", { class: "muted", text: "no queues" }),
    el("h2", { text: "call an action" }),
    calls.length ? el("div", { id: "call-forms" }, calls) : el("p", { class: "muted", text: "no actions" })];
}

// -- one actor --------------------------------------------------------------------------------------------------
async function actorView(view, name, segment, generation) {
  const base = actorPath(name, segment);
  const types = await api("GET", "actors");
  const definition = types.find((t) => t.name === name) || { name, queues: [], actions: [], workflow: false };
  const [status, value] = await Promise.all([api("GET", `${base}/status`), api("GET", `${base}/state`)]);
  const statusCard = el("div", { class: "card", id: "actor-status" });
  let version = status.version;
  const fillStatus = (found) => {
    const parts = [
      el("div", {}, statusBadge(found.workflow), ` version ${found.version}`),
      el("p", { id: "waits", text: found.advice || HINTS[found.workflow] || waitsFor(found) })];
    if (found.compensation) {
      parts.push(el("div", { id: "compensation" },
        el("strong", { text: `compensated: ${found.compensation.undone.length} step(s) undone, in this order` }),
        el("ol", { id: "undone" }, found.compensation.undone.map((location) => el("li", { text: location }))),
        found.compensation.failed.length ? el("p", { class: "status failed",
          text: `rollback failed (retried): ${found.compensation.failed.join(", ")}` }) : null));
    }
    const attributes = Object.entries(found.search || {});
    if (attributes.length) {
      parts.push(el("p", { id: "search-attributes" }, el("span", { class: "muted", text: "search attributes " }),
        attributes.map(([n, value]) => el("span", { class: "attribute", "data-name": n }, `${n} = `,
          el("code", { text: attributeText(value) })))));
    }
    if (found.divergence) {
      parts.push(el("h2", { text: "divergence" }), el("pre", { id: "divergence", text: found.divergence.message }));
    } else if (found.error) {
      parts.push(el("pre", { id: "error", text: found.error }));
    }
    if (found.rewritten) parts.push(el("p", { id: "rewritten", class: "muted", text: noteText(found.rewritten) }));
    statusCard.replaceChildren(...parts);
    const can = found.remedies || [];
    resumeButton.hidden = !can.includes("resume");
    pauseButton.hidden = !can.includes("pause");
    unpauseButton.hidden = !can.includes("unpause");
    terminateButton.hidden = !can.includes("terminate");
  };
  const pauseButton = el("button", { id: "pause", text: "Pause", onclick: () => {
    const reason = prompt("Pause: no wake-up runs it until Unpause; messages sent meanwhile wait. Reason?",
      "paused from the dashboard");
    if (reason !== null) operate("pause", "POST", "pause", reason ? { reason } : {});
  } });
  const unpauseButton = el("button", { id: "unpause", class: "primary", text: "Unpause",
    onclick: () => operate("unpause", "POST", "unpause") });
  const resumeButton = el("button", { id: "resume", class: "primary", text: "Resume",
    onclick: () => operate("resume", "POST", "resume") });
  const terminateButton = el("button", { id: "terminate", text: "Terminate", onclick: () => {
    const reason = prompt("Terminate: the workflow ends and later sends are refused. Reason?", "terminated from the dashboard");
    if (reason !== null) operate("terminate", "POST", "terminate", reason ? { reason } : {});
  } });
  fillStatus(status);
  const events = el("ul", { id: "events", class: "events" });
  const stateBox = el("div", { id: "state" }, valueView(value, "state"));
  const timelineBox = el("div", { id: "history" });
  const lanesBox = el("div", { id: "lanes-box" });  // the timeline (lanes.js)
  const inboxBox = el("div", { id: "inbox-box" });
  const versionsBox = el("div", { id: "versions-box" });
  const versionState = el("div", { id: "version-state", hidden: true });
  const callbacksBox = el("div", { id: "callbacks-box" });
  let entries = [];
  let waiting = (status.waiting_for || {}).callbacks || [];
  const drafts = new Map();
  const showCallbacks = () => callbacksBox.replaceChildren(callbacksCard(waiting, entries, () => refresh(true), drafts));
  const readHistory = async () => {
    try {
      const open = new Set([...timelineBox.querySelectorAll("details[open]")].map((d) => d.dataset.value));
      entries = await api("GET", `${base}/history`);
      timelineBox.replaceChildren(timeline(entries, open));
      // under `dormant dev`, the spans its ring kept add each attempt and the wake-ups (dormant.http.tracing)
      const traced = session.dev ? await api("GET", `ui/spans/${encodeURIComponent(name)}/${segment}`).catch(() => null)
        : null;
      lanesBox.replaceChildren(lanesView(entries, traced ? traced.spans : [], Date.now() / 1000));
    } catch (error) {
      timelineBox.replaceChildren(el("p", { class: "muted", text: `history: ${error.message}` }));
    }
    showCallbacks();
  };
  const readInbox = async () => {
    try {
      inboxBox.replaceChildren(inboxTable(await api("GET", `${base}/inbox`)));
    } catch (error) {
      inboxBox.replaceChildren(el("p", { class: "muted", text: `inbox: ${error.message}` }));
    }
  };
  const forkAt = (at) => {
    const typed = prompt(`Fork version ${at} as a new ${name} actor (its key, as in URLs). Its history is replayed `
      + "against the deployed code first; the new actor starts with that version's state and runs on.", "");
    if (!typed) return;
    let key;
    try {
      key = decodeKey(typed.trim());
    } catch (error) {
      flash(`fork refused: bad key: ${error.message}`, "error");
      return;
    }
    operate("fork", "POST", "fork", { version: at, key });
  };
  const resetTo = (at) => {
    const reason = prompt(`Reset ${name} ${segment} to version ${at}? What it did since is dropped from its history `
      + "and state (messages received since are not given back). Reason?", "reset from the dashboard");
    if (reason !== null) operate("reset", "POST", "reset", reason ? { version: at, reason } : { version: at });
  };
  const showVersion = async (at) => {
    try {
      const kept = await api("GET", `${base}/versions/${at}`);
      versionState.replaceChildren(el("p", { text: `version ${kept.version} (${kept.workflow.state}), state:` }),
        valueView(kept.state, "state"));
      versionState.hidden = false;
    } catch (error) {
      flash(`version ${at}: ${explain(error)}`, "error");
    }
  };
  const readVersions = async () => {
    try {
      versionsBox.replaceChildren(versionsTable(await api("GET", `${base}/versions`), forkAt, resetTo, showVersion));
    } catch (error) {
      versionsBox.replaceChildren(el("p", { class: "muted", text: `versions: ${error.message}` }));
    }
  };
  const refresh = async (force = false) => {
    if (generation !== session.generation) return;
    try {
      const found = await api("GET", `${base}/status`);
      fillStatus(found);
      const beats = JSON.stringify((found.waiting_for || {}).callbacks || []);
      if (beats !== JSON.stringify(waiting)) {  // a heartbeat moves a deadline without a commit
        waiting = (found.waiting_for || {}).callbacks || [];
        showCallbacks();
      }
      if (!force && found.version === version) return;  // nothing committed since: nothing else changed
      version = found.version;
      stateBox.replaceChildren(valueView(await api("GET", `${base}/state`), "state"));
      await Promise.all([readHistory(), readInbox(), readVersions()]);
    } catch (error) {
      if (error.status === 404) flash(`${name} ${segment}: ${error.message}`, "error");
    }
  };
  const operate = async (label, method, suffix, body) => {
    try {
      const result = await api(method, suffix === null ? base : `${base}/${suffix}`, body);
      flash(`${label}: ${result.outcome} — ${result.message}`);
    } catch (error) {
      flash(`${label} refused: ${explain(error)}`, "error");
    }
    await refresh(true);
  };
  await Promise.all([readHistory(), readInbox(), readVersions()]);
  const actions = el("div", { class: "actions" },
    resumeButton, pauseButton, unpauseButton,
    session.dev && definition.workflow ? el("button", { id: "fire-timer", text: "Fire next timer",
      title: "dormant dev: its earliest deadline, retry or scheduled action is due now",
      onclick: () => operate("fire timer", "POST", "fire-timer") }) : null,
    terminateButton,
    el("button", { id: "delete", class: "danger", text: "Delete", onclick: () => {
      if (confirm(`Delete ${name} ${segment} and everything it stores?`)) operate("delete", "DELETE", null);
    } }));
  fill(view,
    el("h1", {}, el("a", { href: `#/type/${encodeURIComponent(name)}`, text: name }), ` ${segment}`),
    statusCard, actions,
    el("section", { id: "timeline-section" }, el("h2", { text: "timeline" }), lanesBox),
    el("div", { class: "grid" },
      el("section", {}, el("h2", { text: "state" }), stateBox,
        el("h2", { text: "open callbacks" }), callbacksBox,
        el("h2", { text: "waiting messages" }), inboxBox,
        ...(await forms(name, base, definition, () => refresh(true))),
        el("h2", { text: "live events" }), events),
      el("section", {}, el("h2", { text: "history" }), timelineBox,
        el("h2", { text: "kept versions (fork or reset from one)" }), versionsBox, versionState)));
  pollStatus(refresh, generation);
  followEvents(base, events, generation, name, segment);
}

function pause(ms) {
  return new Promise((done) => setTimeout(done, ms));
}

async function pollStatus(refresh, generation) {
  while (generation === session.generation) {
    await pause(REFRESH_MS);
    await refresh();
  }
}

// Events are read with short requests (wait=0) every EVENTS_MS, after the page's load event, never with a held
// long-poll: a request left open holds the browser's network idle (a headless Chromium with --virtual-time-budget
// never finished the page while one was pending), and each request is a Lambda invocation that returns at once.
// Under `dormant dev` they are pushed instead, over its WebSocket API (docs/realtime.md; realtime.js), with no
// polling: the list's `data-live` says which.
function showEvent(list, event) {
  list.append(el("li", { "data-seq": String(event.seq) }, `#${event.seq} ${event.name} `,
    el("code", { text: short(event.payload, 200) }), el("span", { class: "muted", text: ` ${when(event.at)}` })));
}

async function followEvents(base, list, generation, name, segment) {
  if (document.readyState !== "complete") {
    await new Promise((done) => window.addEventListener("load", done, { once: true }));
  }
  if (session.pushed && name !== undefined) {
    const url = new URL("realtime", location.href);
    url.protocol = url.protocol === "https:" ? "wss:" : "ws:";
    url.hash = "";
    const subscription = subscribe({
      url: url.href, actor: name, key: decodeKey(decodeURIComponent(segment)), after: 0,
      onEvent: (event) => showEvent(list, event),
      onOpen: () => list.setAttribute("data-live", "pushed"),
      fetchEvent: async (seq) => (await api("GET", `${base}/events?after=${seq - 1}&limit=1`)).events[0],
    });
    while (generation === session.generation) await pause(REFRESH_MS);
    subscription.close();
    return;
  }
  let cursor = 0;
  while (generation === session.generation) {
    try {
      const page = await api("GET", `${base}/events?after=${cursor}&limit=100`);
      if (generation !== session.generation) return;
      for (const event of page.events) showEvent(list, event);
      cursor = page.cursor;
      if (page.events.length === 100) continue;  // more are there: read on at once
    } catch (error) {
      if (error.status === 404) return;
    }
    await pause(EVENTS_MS);
  }
}

// -- routing ------------------------------------------------------------------------------------------------
async function render() {
  session.generation += 1;
  const generation = session.generation;
  const view = document.getElementById("view");
  const [path, query] = location.hash.replace(/^#\/?/, "").split("?");
  const parts = path.split("/").filter(Boolean).map(decodeURIComponent);
  try {
    if (parts[0] === "type" && parts[1]) await listView(view, parts[1], new URLSearchParams(query || ""));
    else if (parts[0] === "actor" && parts.length >= 3) {
      const segment = path.split("/").slice(2).join("/");
      await actorView(view, parts[1], segment, generation);
    } else await typesView(view);
  } catch (error) {
    view.replaceChildren(el("p", { id: "view-error", class: "status failed", text: error.message }));
  }
}

async function start() {
  const config = await fetch("ui/config.json").then((r) => r.json());
  session.dev = config.dev;
  session.pushed = Boolean(config.pushed);
  const form = document.getElementById("token-form");
  const input = document.getElementById("token");
  form.hidden = config.dev || Boolean(session.token);
  form.addEventListener("submit", (event) => {
    event.preventDefault();
    session.token = input.value.trim();
    sessionStorage.setItem("dormant-token", session.token);
    form.hidden = true;
    render();
  });
  window.addEventListener("hashchange", render);
  await render();
}

start();
