// The Dormant dashboard: one page over the API's own routes (see dormant/http/ui.py). Everything from the
// server is inserted as text, never as HTML.

const STATUSES = ["pending", "sleeping", "completed", "failed", "diverged", "rolling_back", "terminated"];
const session = { token: sessionStorage.getItem("dormant-token") || "", dev: false, generation: 0 };

class ApiError extends Error {
  constructor(status, code, message) {
    super(message);
    this.status = status;
    this.code = code;
  }
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

async function api(method, path, body) {
  const headers = {};
  if (session.token) headers.Authorization = `Bearer ${session.token}`;
  const init = { method, headers };
  if (body !== undefined) {
    headers["Content-Type"] = "application/json";
    init.body = JSON.stringify(body);
  }
  const response = await fetch(path, init);
  const data = await response.json().catch(() => null);
  if (!response.ok) {
    const error = data && data.error ? data.error : { code: "http_error", message: response.statusText };
    if (response.status === 401) document.getElementById("token-form").hidden = false;
    throw new ApiError(response.status, error.code, error.message);
  }
  return data;
}

function flash(text, kind = "ok") {
  const box = document.getElementById("flash");
  box.textContent = text;
  box.className = kind;
  box.hidden = false;
}

function when(seconds) {
  if (seconds === null || seconds === undefined) return "-";
  const stamp = new Date(seconds * 1000).toISOString().replace("T", " ").slice(0, 19) + " UTC";
  const delta = seconds - Date.now() / 1000;
  return `${stamp} (${delta >= 0 ? "in " + span(delta) : span(-delta) + " ago"})`;
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

function statusBadge(state) {
  return el("span", { class: `status ${state}`, text: state });
}

function waitsFor(status) {
  const waits = status.waiting_for || {};
  switch (status.workflow) {
    case "sleeping": {
      const parts = [];
      if (waits.queues && waits.queues.length) parts.push(`a message on ${waits.queues.join(", ")}`);
      if (waits.deadline) parts.push(`${waits.queues && waits.queues.length ? "its deadline" : "a timer"}: ${when(waits.deadline)}`);
      if (waits.retry_at) parts.push(`a retry at ${when(waits.retry_at)}`);
      return parts.length ? "waits for " + parts.join(" or ") : "a wake-up is due";
    }
    case "pending": return "created; its first wake-up is on its way";
    case "running": return "a wake-up is running it";
    case "completed": return `finished: ${short(status.output)}`;
    case "rolling_back": return "compensating" + (waits.retry_at ? `; next try ${when(waits.retry_at)}` : "");
    default: return (status.error || "").split("\n")[0];
  }
}

const HINTS = {
  failed: "failed: fix the cause, then Resume — the failed step runs again with a fresh attempt count",
  diverged: "diverged: deploy code that matches its history, then Resume — its waiting messages run then",
  terminated: "terminated by an operator: it takes no more messages",
};

function actorPath(name, segment) {
  return `actors/${encodeURIComponent(name)}/${segment}`;
}

// -- views -------------------------------------------------------------------------------------------------
async function typesView(view) {
  const types = await api("GET", "actors");
  const rows = types.map((t) => el("tr", { "data-type": t.name },
    el("td", {}, el("a", { href: `#/type/${encodeURIComponent(t.name)}`, text: t.name })),
    el("td", { text: t.workflow ? "yes" : "no" }),
    el("td", { text: t.queues.join(", ") || "-" }),
    el("td", { text: t.actions.join(", ") || "-" })));
  const select = el("select", { id: "open-type" }, types.map((t) => el("option", { value: t.name, text: t.name })));
  const key = el("input", { id: "open-key", placeholder: "key as in URLs (main, tenant,42)", required: true });
  view.replaceChildren(
    el("h1", { text: "Actor types" }),
    el("table", { id: "types" }, el("thead", {}, el("tr", {}, ["type", "workflow", "queues", "actions"].map(
      (h) => el("th", { text: h })))), el("tbody", {}, rows)),
    el("h2", { text: "Open an actor" }),
    el("form", { class: "toolbar", onsubmit: (event) => {
      event.preventDefault();
      location.hash = `#/actor/${encodeURIComponent(select.value)}/${key.value.trim()}`;
    } }, select, key, el("button", { type: "submit", text: "open" })));
}

async function listView(view, name, params) {
  const status = params.get("status") || "";
  const cursor = params.get("cursor") || "";
  const query = new URLSearchParams({ limit: "20" });
  if (status) query.set("status", status);
  if (cursor) query.set("cursor", cursor);
  const page = await api("GET", `actors/${encodeURIComponent(name)}?${query}`);
  const filter = el("select", { id: "status-filter", onchange: () => {
    location.hash = `#/type/${encodeURIComponent(name)}` + (filter.value ? `?status=${filter.value}` : "");
  } }, el("option", { value: "", text: "any status" }), STATUSES.map((s) => el("option", { value: s, text: s })));
  filter.value = status;
  const rows = page.actors.map((actor) => {
    const waits = el("td", { class: "waits muted", text: "…" });
    api("GET", `${actorPath(name, actor.segment)}/status`).then((found) => { waits.textContent = waitsFor(found); })
      .catch((error) => { waits.textContent = error.message; });
    return el("tr", { "data-key": actor.key.join(",") },
      el("td", {}, el("a", { href: `#/actor/${encodeURIComponent(name)}/${actor.segment}`, text: actor.key.join(", ") })),
      el("td", {}, statusBadge(actor.status)), el("td", { text: when(actor.since) }),
      el("td", { text: String(actor.version) }), waits);
  });
  const next = page.cursor ? el("a", { id: "next-page", href: `#/type/${encodeURIComponent(name)}?` +
    new URLSearchParams({ ...(status ? { status } : {}), cursor: page.cursor }), text: "next page →" }) : null;
  view.replaceChildren(
    el("h1", {}, `${name}: actors`),
    el("div", { class: "toolbar" }, el("label", {}, "status ", filter), next),
    rows.length ? el("table", { id: "actors" }, el("thead", {}, el("tr", {}, ["key", "status", "since", "version",
      "what it waits for"].map((h) => el("th", { text: h })))), el("tbody", {}, rows))
      : el("p", { id: "no-actors", class: "muted", text: "no actors" + (status ? ` in status ${status}` : "") }));
}

function entryLabel(entry) {
  const took = entry.updated_at - entry.created_at;
  const parts = [];
  switch (entry.kind) {
    case "step":
      parts.push(`step ${entry.name}`);
      if (entry.status === "completed") parts.push(`→ ${short(entry.output)} in ${span(took)}`);
      if (entry.attempts > 1) parts.push(`(${entry.attempts} attempts)`);
      if (entry.retry_at) parts.push(`retry at ${when(entry.retry_at)}`);
      break;
    case "loop": parts.push(`loop ${entry.name}: iteration ${entry.iteration}`); break;
    case "sleep": parts.push(`sleep ${entry.name} until ${when(entry.deadline)}`); break;
    case "message":
      parts.push(`wait ${entry.name}: ` + (entry.timed_out ? "timed out" : entry.messages.length
        ? "received " + entry.messages.map((m) => `${m.name} ${short(m.body, 60)}`).join("; ") : "waiting"));
      break;
    case "join": case "race":
      parts.push(`${entry.kind} ${entry.name}: ` + Object.entries(entry.branches || {}).map(
        ([b, r]) => `${b} ${r.status}`).join(", ") + (entry.winner ? `, winner ${entry.winner}` : ""));
      break;
    default: parts.push(`${entry.kind} ${entry.name}`);
  }
  return parts.join(" ");
}

function timeline(entries) {
  return el("ol", { id: "timeline", class: "timeline" }, entries.slice().sort((a, b) => a.seq - b.seq).map((entry) => {
    const depth = entry.location.split("/").length - 1;
    const item = el("li", { class: entry.status, "data-location": entry.location },
      el("span", { text: entryLabel(entry) }),
      el("span", { class: "detail", text: entry.location }));
    item.style.marginLeft = `${depth * 1.2}rem`;  // through CSSOM: the page's CSP forbids inline style attributes
    if (entry.error) item.append(el("span", { class: "error", text: `${entry.error.type}: ${entry.error.message}` }));
    return item;
  }));
}

async function actorView(view, name, segment, generation) {
  const base = actorPath(name, segment);
  const [status, value] = await Promise.all([api("GET", `${base}/status`), api("GET", `${base}/state`)]);
  let history = [];
  let historyNote = null;
  try {
    history = await api("GET", `${base}/history`);
  } catch (error) {
    historyNote = el("p", { class: "muted", text: `history: ${error.message}` });
  }
  const statusCard = el("div", { class: "card", id: "actor-status" });
  const fillStatus = (found) => {
    const parts = [
      el("div", {}, statusBadge(found.workflow), ` version ${found.version}`),
      el("p", { id: "waits", text: HINTS[found.workflow] || waitsFor(found) })];
    if (found.divergence) {
      parts.push(el("h2", { text: "divergence" }), el("pre", { id: "divergence", text: found.divergence.message }));
    } else if (found.error) {
      parts.push(el("pre", { id: "error", text: found.error }));
    }
    statusCard.replaceChildren(...parts);
  };
  fillStatus(status);
  const operate = async (label, method, suffix, body) => {
    try {
      const result = await api(method, suffix === null ? base : `${base}/${suffix}`, body);
      flash(`${label}: ${result.outcome} — ${result.message}`);
    } catch (error) {
      flash(`${label} refused: ${error.message}`, "error");
    }
    await refresh();
  };
  const events = el("ul", { id: "events", class: "events" });
  const stateBox = el("pre", { id: "state", text: JSON.stringify(value, null, 2) });
  const timelineBox = el("div", {}, historyNote || timeline(history));
  const refresh = async () => {
    if (generation !== session.generation) return;
    try {
      fillStatus(await api("GET", `${base}/status`));
      stateBox.textContent = JSON.stringify(await api("GET", `${base}/state`), null, 2);
      if (!historyNote) timelineBox.replaceChildren(timeline(await api("GET", `${base}/history`)));
    } catch (error) {
      if (error.status === 404) flash(`${name} ${segment}: ${error.message}`, "error");
    }
  };
  view.replaceChildren(
    el("h1", {}, el("a", { href: `#/type/${encodeURIComponent(name)}`, text: name }), ` ${segment}`),
    statusCard,
    el("div", { class: "actions" },
      el("button", { id: "resume", class: "primary", text: "Resume", onclick: () => operate("resume", "POST", "resume") }),
      el("button", { id: "terminate", text: "Terminate", onclick: () => {
        const reason = prompt("Terminate: the workflow ends and later sends are refused. Reason?", "terminated from the dashboard");
        if (reason !== null) operate("terminate", "POST", "terminate", reason ? { reason } : {});
      } }),
      el("button", { id: "delete", class: "danger", text: "Delete", onclick: () => {
        if (confirm(`Delete ${name} ${segment} and everything it stores?`)) operate("delete", "DELETE", null);
      } })),
    el("div", { class: "grid" },
      el("section", {}, el("h2", { text: "state" }), stateBox, el("h2", { text: "live events" }), events),
      el("section", {}, el("h2", { text: "history" }), timelineBox)));
  pollStatus(refresh, generation);
  followEvents(base, events, generation);
}

async function pollStatus(refresh, generation) {
  while (generation === session.generation) {
    await new Promise((done) => setTimeout(done, 1500));
    await refresh();
  }
}

async function followEvents(base, list, generation) {
  let cursor = 0;
  while (generation === session.generation) {
    try {
      const page = await api("GET", `${base}/events?after=${cursor}&wait=10&limit=100`);
      if (generation !== session.generation) return;
      for (const event of page.events) {
        list.append(el("li", { "data-seq": String(event.seq) }, `#${event.seq} ${event.name} `,
          el("code", { text: short(event.payload, 200) }), el("span", { class: "muted", text: ` ${when(event.at)}` })));
      }
      cursor = page.cursor;
    } catch (error) {
      if (error.status === 404) return;
      await new Promise((done) => setTimeout(done, 2000));
    }
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
