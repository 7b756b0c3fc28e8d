// The actor's timeline: its history's entries on a time axis, one lane per branch (join, race, map item), from the
// times history records (no tracing needed); under `dormant dev` the spans the dev stack kept add each step attempt
// and the wake-ups. Stable hooks for tests and tools: every lane has `data-lane` (its location; "main" for the
// workflow's own), every bar `data-entry` (its entry's location).

const BRANCHING = new Set(["join", "race", "map"]);
const DRAWN = new Set(["step", "sleep", "message", "callback", "join", "race", "map", "map_item", "try"]);
const KIND_TEXT = { message: "wait", map_item: "item" };
export const MAX_BARS = 2000; // the newest bars beyond this are left out (a note says so): the page stays usable

function make(tag, attrs = {}, text = null) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs)) {
    if (value !== undefined && value !== null) node.setAttribute(name, String(value));
  }
  if (text !== null) node.textContent = text;
  return node;
}

function seconds(value) {
  if (value < 1) return `${Math.round(value * 1000)} ms`;
  if (value < 120) return `${value.toFixed(1)} s`;
  if (value < 7200) return `${(value / 60).toFixed(1)} min`;
  if (value < 172800) return `${(value / 3600).toFixed(1)} h`;
  return `${(value / 86400).toFixed(1)} d`;
}

function iso(value) {
  return new Date(value * 1000).toISOString().replace("T", " ").slice(0, 23) + " UTC";
}

// The lane of each location: the deepest branch above it (a branch is a child location of a join, race or map).
export function laneOf(location, branching) {
  const parts = location.split("/");
  for (let cut = parts.length - 1; cut >= 1; cut -= 1) {
    if (branching.has(parts.slice(0, cut).join("/"))) return parts.slice(0, cut + 1).join("/");
  }
  return "main";
}

function present(value) {
  return value !== undefined && value !== null && value !== 0;
}

// One bar per drawn entry: {entry, lane, start, end, open (still running), kind, attempts, label}.
export function barsOf(entries, now) {
  const branching = new Set(entries.filter((e) => BRANCHING.has(e.kind)).map((e) => e.location));
  const bars = [];
  for (const entry of entries) {
    if (!DRAWN.has(entry.kind)) continue;
    const lane = entry.kind === "map_item" ? entry.location : laneOf(entry.location, branching);
    const pending = entry.status === "pending";
    let start = entry.created_at;
    let end = pending ? now : entry.updated_at || entry.created_at;
    let last = null;
    if (entry.kind === "step") {
      if (present(entry.started_at)) {
        last = [entry.started_at, present(entry.ended_at) ? entry.ended_at : now];
        start = Math.min(start || entry.started_at, entry.started_at);
      }
      if (present(entry.ended_at) && !pending) end = entry.ended_at;
      if (entry.retry_at) end = Math.max(end, Math.min(entry.retry_at, now));
    } else if (entry.kind === "sleep") {
      // it ended when due (the wake-up that noticed came later)
      end = pending ? Math.max(now, start) : Math.min(entry.updated_at || Infinity, entry.deadline || Infinity);
      if (!Number.isFinite(end)) end = start;
    }
    if (!present(start)) continue;
    bars.push({ entry, lane, start, end: Math.max(start, end), open: pending, last,
      label: `${KIND_TEXT[entry.kind] || entry.kind} ${entry.name}` });
    if (entry.kind === "step" && (entry.rollback_done || entry.rollback_error)) {
      const at = entry.updated_at || end;
      bars.push({ entry, lane, start: at, end: at, open: false, rollback: true, label: `rollback ${entry.name}` });
    }
  }
  return bars;
}

function place(node, start, end, from, total) {
  // CSSOM, not a style attribute: the page's CSP forbids inline styles
  node.style.left = `${((start - from) / total) * 100}%`;
  node.style.width = `max(3px, ${((end - start) / total) * 100}%)`;
}

function barNode(bar, from, total, attempts) {
  const entry = bar.entry;
  const classes = ["bar", entry.kind, bar.rollback ? "rollback" : entry.status];
  if (bar.open) classes.push("open");
  const took = bar.end - bar.start;
  const lines = [`${bar.label} (${entry.location})`, `${bar.rollback ? "ran" : entry.status}: ${iso(bar.start)}`
    + (took > 0 ? ` + ${seconds(took)}` : "")];
  if (entry.kind === "step" && !bar.rollback) lines.push(`${entry.attempts} attempt${entry.attempts === 1 ? "" : "s"}`);
  if (entry.error) lines.push(`${entry.error.type}: ${entry.error.message}`);
  const node = make("div", { class: classes.join(" "), "data-entry": bar.rollback ? `${entry.location}#rollback`
    : entry.location, "data-kind": bar.rollback ? "rollback" : entry.kind, "data-status": entry.status,
    "data-attempts": entry.kind === "step" && !bar.rollback ? entry.attempts : null, title: lines.join("\n"),
    role: "img", "aria-label": lines.join(", ") });
  place(node, bar.start, bar.end, from, total);
  const drawn = attempts.get(entry.location) || [];
  if (!bar.rollback && entry.kind === "step") {
    // each attempt the dev stack traced; from history alone, the last attempt
    const runs = drawn.length ? drawn : bar.last ? [{ start: bar.last[0], end: bar.last[1],
      attempt: entry.attempts, outcome: entry.status }] : [];
    for (const run of runs) {
      const part = make("div", { class: `attempt ${run.outcome}`, "data-attempt": run.attempt,
        title: `attempt ${run.attempt}: ${run.outcome}, ${seconds(run.end - run.start)}` });
      if (took > 0) {
        part.style.left = `${((run.start - bar.start) / took) * 100}%`;
        part.style.width = `max(2px, ${((run.end - run.start) / took) * 100}%)`;
      }
      node.append(part);
    }
  }
  node.append(make("span", { class: "bar-label" }, bar.label));
  return node;
}

// The view: `entries` as the history route gives them, `spans` from /ui/spans (or []), `now` in epoch seconds.
export function lanesView(entries, spans, now) {
  const attempts = new Map(); // step location -> its traced attempts
  const wakes = [];
  for (const span of spans || []) {
    const attrs = span.attributes || {};
    if (span.name === "dormant.wake") wakes.push(span);
    else if (attrs["dormant.entry.kind"] === "step" && attrs["dormant.attempt"] !== undefined) {
      const list = attempts.get(attrs["dormant.location"]) || [];
      list.push({ start: span.start, end: span.end, attempt: attrs["dormant.attempt"],
        outcome: attrs["dormant.outcome"] });
      attempts.set(attrs["dormant.location"], list);
    }
  }
  for (const list of attempts.values()) list.sort((a, b) => a.start - b.start);
  let bars = barsOf(entries, now);
  const box = make("div", { id: "lanes", class: "lanes" });
  if (!bars.length) {
    box.append(make("p", { class: "muted" }, "nothing to draw yet"));
    return box;
  }
  bars.sort((a, b) => a.start - b.start || a.entry.seq - b.entry.seq);
  if (bars.length > MAX_BARS) {
    box.append(make("p", { class: "muted", id: "lanes-cut" }, `the first ${MAX_BARS} of ${bars.length} bars`));
    bars = bars.slice(0, MAX_BARS);
  }
  let from = Math.min(...bars.map((b) => b.start));
  let to = Math.max(...bars.map((b) => b.end));
  for (const wake of wakes) {
    from = Math.min(from, wake.start);
    to = Math.max(to, wake.end);
  }
  const total = Math.max(to - from, 0.001);
  box.append(make("div", { class: "lanes-axis" }, `${iso(from)} → ${seconds(to - from)}`));
  const lanes = new Map();
  const laneNode = (name) => {
    if (!lanes.has(name)) {
      const track = make("div", { class: "lane-track" });
      const row = make("div", { class: "lane", "data-lane": name });
      row.append(make("span", { class: "lane-name", title: name }, name === "main" ? "workflow" : name), track);
      lanes.set(name, row);
    }
    return lanes.get(name).lastChild;
  };
  laneNode("main");
  for (const bar of bars) laneNode(bar.lane).append(barNode(bar, from, total, attempts));
  if (wakes.length) {
    const track = laneNode("wake-ups");
    for (const wake of wakes.sort((a, b) => a.start - b.start)) {
      const node = make("div", { class: `bar wake ${wake.status}`, "data-entry": `wake:${wake.span_id}`,
        "data-kind": "wake", title: `wake-up ${wake.attributes["dormant.outcome"] || ""}: ${iso(wake.start)} + `
          + `${seconds(wake.end - wake.start)}\ntrace ${wake.trace_id}` });
      place(node, wake.start, wake.end, from, total);
      track.append(node);
    }
  }
  // lanes in the order of their first bar, the workflow's first and the wake-ups last
  const order = [...lanes.keys()].sort((a, b) => (a === "main" ? -1 : b === "main" ? 1 : a === "wake-ups" ? 1
    : b === "wake-ups" ? -1 : 0));
  for (const name of order) box.append(lanes.get(name));
  return box;
}
