// countersign approver page. Plain DOM, no build step, no inline script (the CSP forbids it).
// Every value from the server is written with textContent, never parsed as HTML.
"use strict";

const KEY_SLOT = "countersign.key";
// API paths relative to /ui/, so the page also works behind a path prefix.
const API = new URL("../v1/", document.baseURI);

const $ = (id) => document.getElementById(id);
let key = sessionStorage.getItem(KEY_SLOT);
let current = null; // the action shown in the dialog, with the digest the page computed
// The tenant's time zone (GET /v1/me): every time on the page is shown in it, the zone named,
// the UTC instant on hover — as the server writes window sentences.
let tenantZone = sessionStorage.getItem("countersign.zone");

// ---- the API ------------------------------------------------------------------------------

class ApiError extends Error {
  constructor(status, error) {
    super(error.message || `HTTP ${status}`);
    this.status = status;
    this.code = error.code || "unknown";
    this.detail = error;
  }
}

async function api(method, path, body, credential = key) {
  // The channel names this page on the decisions it sends (SC-CH-08); reads ignore it.
  const headers = { Authorization: `Bearer ${credential}`, "Countersign-Channel": "page" };
  if (body !== undefined) headers["Content-Type"] = "application/json";
  let response;
  try {
    response = await fetch(new URL(path, API), {
      method,
      headers,
      body: body === undefined ? undefined : JSON.stringify(body),
      cache: "no-store",
      credentials: "omit",
      referrerPolicy: "no-referrer",
    });
  } catch (e) {
    throw new ApiError(0, { code: "unreachable", message: "The server cannot be reached." });
  }
  const text = await response.text();
  let value = null;
  try { value = text ? JSON.parse(text) : null; } catch (e) { value = null; }
  if (!response.ok) {
    throw new ApiError(response.status, (value && value.error) || {});
  }
  return value;
}

// ---- the digest of what is shown ---------------------------------------------------------

// Canonical JSON as the server computes it: object keys in code-point order, no white space.
function canonical(value) {
  if (Array.isArray(value)) return `[${value.map(canonical).join(",")}]`;
  if (value !== null && typeof value === "object") {
    const keys = Object.keys(value).sort(byCodePoint);
    return `{${keys.map((k) => `${JSON.stringify(k)}:${canonical(value[k])}`).join(",")}}`;
  }
  return JSON.stringify(value);
}

function byCodePoint(a, b) {
  const x = Array.from(a, (c) => c.codePointAt(0));
  const y = Array.from(b, (c) => c.codePointAt(0));
  for (let i = 0; i < Math.min(x.length, y.length); i++) {
    if (x[i] !== y[i]) return x[i] - y[i];
  }
  return x.length - y.length;
}

async function digestOf(context) {
  const bytes = new TextEncoder().encode(canonical(context));
  const hash = await crypto.subtle.digest("SHA-256", bytes);
  return "sha256:" + Array.from(new Uint8Array(hash), (b) => b.toString(16).padStart(2, "0")).join("");
}

// ---- small DOM helpers -------------------------------------------------------------------

function el(tag, attrs, ...children) {
  const node = document.createElement(tag);
  for (const [name, value] of Object.entries(attrs || {})) {
    if (name === "text") node.textContent = value;
    else if (name === "class") node.className = value;
    else node.setAttribute(name, value);
  }
  for (const child of children) if (child) node.append(child);
  return node;
}

function say(message) {
  $("status").textContent = message;
}

function alarm(message, ok) {
  const box = $("alert");
  box.textContent = message;
  box.classList.toggle("ok", Boolean(ok));
  box.hidden = !message;
}

function pretty(value) {
  return JSON.stringify(value, null, 2);
}

// What a state says of an action, as the rest of a sentence after "it" or its id
// ("it has run and succeeded", never "it is now succeeded").
const STATE_WORDS = {
  pending_approval: "is waiting for a countersignature",
  approved: "is approved and scheduled to run",
  executing: "is running",
  succeeded: "has run and succeeded",
  failed: "has run and failed",
  denied: "is denied",
  cancelled: "is cancelled",
};

function stateWords(state) {
  return STATE_WORDS[state] || `is ${state.replace(/_/g, " ")}`;
}

// What an approval left to do: how many approvals a quorum still needs (the answer's
// `next_action.still_needed`, SC-POL-04), else what became of the call.
function afterApproval(action) {
  const needed = action.state === "pending_approval" && action.next_action.still_needed;
  if (needed) return `${needed} more ${needed === 1 ? "approval" : "approvals"} needed`;
  return `it ${stateWords(action.state)}`;
}

// What the policy decided and when the call runs, as the card's sentence.
function windowText(action) {
  const schedule = action.approval && action.approval.context && action.approval.context.schedule;
  if (schedule && schedule.summary) return text(`Runs ${schedule.summary}`);
  const window = action.schedule
    ? [text("between "), when(action.schedule.not_before), text(" and "), when(action.schedule.not_after)]
    : null;
  switch (action.decision) {
    case "require_approval":
      return window ? span(text("Runs "), ...window) : text("No window: runs as soon as it is approved");
    case "schedule":
      return window ? span(text("Scheduled by policy, no approval needed: runs "), ...window)
        : text("Scheduled by policy, no approval needed");
    case "allow":
      return window ? span(text("Allowed by policy, no approval needed: runs "), ...window)
        : text("Allowed by policy, no approval needed: ran when it was submitted");
    case "set_result":
      return text("Answered by policy with a set result: no tool was called");
    default:
      return text("Denied by policy: never runs");
  }
}

function text(value) {
  return document.createTextNode(value);
}

function span(...children) {
  return el("span", {}, ...children);
}

// "Tue 1 Dec 2026, 10:42:10 CET (Europe/Berlin)", the UTC instant on hover.
function when(iso) {
  const t = new Date(iso);
  if (Number.isNaN(t.getTime())) return text(iso);
  const zone = tenantZone || "UTC";
  const shown = new Intl.DateTimeFormat("en-GB", {
    timeZone: zone, weekday: "short", day: "numeric", month: "short", year: "numeric",
    hour: "2-digit", minute: "2-digit", second: "2-digit", hourCycle: "h23", timeZoneName: "short",
  }).format(t);
  return el("time", { datetime: t.toISOString(), "data-zone": zone, title: utc(iso),
    text: `${shown} (${zone})` });
}

// "2 h 05 min", "4 min 10 s", "12 s"; the server decides expiry, this is only a countdown.
function timeLeft(iso) {
  const ms = Date.parse(iso) - Date.now();
  if (!(ms > 0)) return { text: "expired", expired: true };
  const s = Math.floor(ms / 1000);
  const d = Math.floor(s / 86400), h = Math.floor((s % 86400) / 3600);
  const m = Math.floor((s % 3600) / 60), sec = s % 60;
  const pad = (n) => String(n).padStart(2, "0");
  let text;
  if (d > 0) text = `${d} d ${h} h`;
  else if (h > 0) text = `${h} h ${pad(m)} min`;
  else if (m > 0) text = `${m} min ${pad(sec)} s`;
  else text = `${sec} s`;
  return { text: `${text} left`, expired: false };
}

// "2026-12-01 13:48:10 UTC" from an RFC 3339 instant.
function utc(iso) {
  const t = new Date(iso);
  return Number.isNaN(t.getTime()) ? iso : `${t.toISOString().slice(0, 19).replace("T", " ")} UTC`;
}

function countdown(iso) {
  const span = el("span", { class: "left", "data-expires": iso });
  tick(span);
  return span;
}

function tick(span) {
  const left = timeLeft(span.dataset.expires);
  span.textContent = left.text;
  span.classList.toggle("expired", left.expired);
}

setInterval(() => document.querySelectorAll("[data-expires]").forEach(tick), 1000);

// ---- errors in words ---------------------------------------------------------------------

// What a refusal means for the person at the page. The server is the authority: the page
// never decides on its own that an action is stale, it reports what the server answered.
async function explain(error, action) {
  switch (error.code) {
    case "context_changed":
      return "This action changed since the page showed it: the context you saw is no longer " +
        "the one waiting for approval. Nothing was approved. Review it again.";
    case "action_sealed": {
      let reason = "";
      try {
        const now = await api("GET", `actions/${encodeURIComponent(action.id)}`);
        const why = now.outcome && now.outcome.reason;
        if (why && why !== now.state) reason = ` (${why.replace(/_/g, " ")})`;
      } catch (e) { /* the state alone still explains it */ }
      const already = stateWords(error.detail.state).replace(/^(is|has)/, "$1 already");
      return `This action ${already}${reason}; it changed or expired after this page loaded. ` +
        "Nothing was done.";
    }
    case "action_executing":
      return "This action is running now; it can no longer be cancelled.";
    case "not_found":
      return "This action no longer exists for this key.";
    case "unauthenticated":
      return "The key was not accepted. Sign in again.";
    case "forbidden":
      return `Not allowed: ${error.message}`;
    case "validation_failed":
      return `Check the input: ${error.message}`;
    default:
      return error.message;
  }
}

// ---- rendering ---------------------------------------------------------------------------

function card(action, extra) {
  const item = el("li", { class: "card", "data-action-id": action.id });
  item.append(
    el("h3", {}, el("span", { text: action.tool }), document.createTextNode(" "),
      el("span", { class: "state", text: action.state.replace(/_/g, " ") })),
    el("p", { class: "meta", text: `Agent ${action.agent_id} · ${action.id}` }),
    el("p", { class: "meta" }, windowText(action)),
  );
  const approval = action.approval;
  if (approval && approval.approver) {
    const signed = (approval.quorum && approval.quorum.signed) || [];
    const by = signed.length ? signed.map((s) => signerText(s.approver, s.person)).join("; ") :
      signerText(approval.approver, approval.person);
    item.append(el("p", { class: "meta approved-by", text: `Approved by ${by}` }));
  }
  if (extra) extra(item);
  item.append(el("pre", { "aria-label": `Arguments of ${action.id}`, text: pretty(action.args) }));
  item.append(trail(action));
  return item;
}

// Who a person is (SC-ID-07): the name and email their provider gave, and the issuer and
// subject that are the person; `null` for a key.
function personText(person) {
  if (!person) return null;
  const shown = [person.name, person.email && `<${person.email}>`].filter(Boolean).join(" ");
  return `${shown ? shown + " " : ""}(${person.subject} at ${person.issuer})`;
}

// An approver or an actor: the key or agent id, and beside it the person a token named.
function signerText(id, person) {
  const who = personText(person);
  return who ? `${id} — ${who}` : id;
}

function trail(action) {
  const details = el("details", {}, el("summary", { text: "Audit trail" }));
  const list = el("ol", { class: "trail" });
  details.append(list);
  details.addEventListener("toggle", async () => {
    if (!details.open || list.childElementCount) return;
    try {
      const events = await api("GET", `actions/${encodeURIComponent(action.id)}/events`);
      for (const e of events.data) {
        const who = e.actor ?
          `${e.actor.type}${e.actor.id ? " " + signerText(e.actor.id, e.actor.person) : ""}` : "";
        const line = ` · ${e.from || "—"} → ${e.to} · by ${who}` +
          (e.reason ? ` · ${e.reason.replace(/_/g, " ")}` : "");
        list.append(el("li", {}, when(e.at), text(line)));
      }
    } catch (error) {
      list.append(el("li", { text: await explain(error, action) }));
    }
  });
  return details;
}

// What each card was drawn from, so that a refresh redraws only the cards whose action changed.
const drawnFrom = new WeakMap();

// Puts the actions' cards into the list, keeping the very node of each card whose action did
// not change (an open audit trail, the focus and the reviewer's place stay) and moving nodes
// only when they are out of order.
function fill(listId, actions, render) {
  const list = $(listId);
  const kept = new Map(Array.from(list.children, (node) => [node.dataset.actionId, node]));
  const nodes = actions.map((action) => {
    const json = JSON.stringify(action), node = kept.get(action.id);
    if (node && drawnFrom.get(node) === json) return node;
    const fresh = render(action);
    drawnFrom.set(fresh, json);
    return fresh;
  });
  const wanted = new Set(nodes);
  for (const node of Array.from(list.children)) if (!wanted.has(node)) node.remove();
  nodes.forEach((node, i) => {
    if (list.children[i] !== node) list.insertBefore(node, list.children[i] || null);
  });
  $(`${listId}-empty`).hidden = actions.length > 0;
  const count = $(`${listId}-count`);
  if (count) count.textContent = `(${actions.length})`;
}

// Why it waits: the matched rule, as the countersigned context names it (SC-POL-05).
function ruleText(action) {
  const rule = action.approval && action.approval.context.policy;
  if (!rule) return null;
  const who = rule.approver_groups ? ` · approvers: ${rule.approver_groups.join(", ")}` : "";
  return `Rule #${rule.rule} “${rule.label}”${who}`;
}

// A quorum's progress (SC-POL-04): who approved so far and how many are still needed.
function quorumText(action) {
  const rule = action.approval && action.approval.context.policy;
  const required = (rule && rule.approvals) || 1;
  if (required < 2) return null;
  const needed = action.next_action.still_needed;
  const given = (action.approvals || []).map((s) => signerText(s.approver, s.person) +
    (s.grant ? `, asking a grant of ${plural(s.grant.uses, "further call", "further calls")}` : ""));
  const by = given.length ? ` (${given.join(", ")})` : "";
  return `${required - needed} of ${required} approvals given${by}; ${needed} still needed`;
}

function renderPending(action) {
  const drawn = card(action, (item) => {
    for (const line of [ruleText(action), quorumText(action)]) {
      if (line) item.append(el("p", { class: "meta", text: line }));
    }
    const expires = action.approval && action.approval.expires_at;
    if (expires) {
      item.append(el("p", { class: "meta" }, text("Expires: "), countdown(expires), text(" · "),
        when(expires)));
    }
    const review = el("button", { type: "button", class: "primary", text: "Review…",
      "aria-label": `Review ${action.tool} from ${action.agent_id}` });
    review.addEventListener("click", () => openDecision(action));
    item.append(el("div", { class: "actions" }, review));
  });
  // Selectable for a batch decision; reachable by j / k (focusable, not a tab stop).
  const box = el("input", { type: "checkbox", "data-select": action.id });
  box.checked = selected.has(action.id);
  box.addEventListener("change", () => { select(action.id, box.checked); });
  drawn.prepend(el("label", { class: "pick" }, box,
    text(`Select ${action.tool} from ${action.agent_id}`)));
  drawn.setAttribute("tabindex", "-1");
  return drawn;
}

// ---- the pending list: filters, similar calls, batch decisions, keys ---------------------

let pendingAll = []; // every pending action the last load read, newest first
const selected = new Set(); // ids chosen for a batch decision

function select(id, on) {
  if (on) selected.add(id); else selected.delete(id);
  const box = document.querySelector(`input[data-select="${id}"]`);
  if (box) box.checked = on;
  counted();
}

function counted() {
  const n = selected.size;
  $("selected-count").textContent = n ? `${n} selected` : "None selected";
  $("approve-selected").disabled = !n;
  $("deny-selected").disabled = !n;
  $("approve-selected").textContent = n ? `Approve selected (${n})` : "Approve selected";
  $("deny-selected").textContent = n ? `Deny selected (${n})` : "Deny selected";
}

// Similar calls — the same tool from the same agent — side by side: the groups in the order of
// their newest call, each newest first.
function grouped(actions) {
  const similar = (a) => `${a.tool}\u0000${a.agent_id}`;
  const first = new Map();
  actions.forEach((a, i) => { if (!first.has(similar(a))) first.set(similar(a), i); });
  return actions.map((a, i) => [first.get(similar(a)), i, a]).sort((x, y) => x[0] - y[0] || x[1] - y[1])
    .map((x) => x[2]);
}

function options(selectId, values, all) {
  const list = $(selectId), chosen = list.value;
  list.replaceChildren(el("option", { value: "", text: all }),
    ...values.map((v) => el("option", { value: v, text: v })));
  list.value = values.includes(chosen) ? chosen : "";
}

function drawPending() {
  const unique = (f) => Array.from(new Set(pendingAll.map(f))).sort();
  options("filter-tool", unique((a) => a.tool), "All tools");
  options("filter-agent", unique((a) => a.agent_id), "All agents");
  const tool = $("filter-tool").value, agent = $("filter-agent").value;
  const shown = grouped(pendingAll.filter((a) => (!tool || a.tool === tool) &&
    (!agent || a.agent_id === agent)));
  for (const id of Array.from(selected)) {
    if (!shown.some((a) => a.id === id)) select(id, false);
  }
  fill("pending", shown, renderPending);
  const groups = new Map();
  for (const a of shown) {
    const k = `${a.tool} from ${a.agent_id}`;
    groups.set(k, [...(groups.get(k) || []), a]);
  }
  $("groups").replaceChildren(...Array.from(groups).filter(([, g]) => g.length > 1).map(([name, g]) => {
    const pick = el("button", { type: "button", text: `Select these ${g.length}`,
      "aria-label": `Select the ${g.length} calls of ${name}` });
    pick.addEventListener("click", () => {
      g.forEach((a) => select(a.id, true));
      $("approve-selected").focus();
    });
    return el("li", {}, text(`${name}: ${g.length} waiting `), pick);
  }));
  counted();
}

// One request decides every selected call (POST /v1/decisions), each with the digest this page
// computed of what it shows; each is answered on its own.
async function decideSelected(decision) {
  const reason = $("batch-reason").value.trim();
  if (decision === "deny" && !reason) {
    alarm("Give a reason to deny the selected calls; it is recorded in each audit trail.");
    $("batch-reason").focus();
    return;
  }
  const chosen = pendingAll.filter((a) => selected.has(a.id));
  const decisions = [];
  for (const a of chosen) {
    const digest = await digestOf(a.approval.context);
    if (digest !== a.approval.context_digest) {
      alarm(`This page cannot reproduce the digest of ${a.id}, so it decides nothing. Reload.`);
      return;
    }
    decisions.push(decision === "approve" ? { id: a.id, decision, context_digest: digest }
      : { id: a.id, decision, context_digest: digest, reason });
  }
  for (const b of ["approve-selected", "deny-selected"]) $(b).disabled = true;
  try {
    const answer = await api("POST", "decisions", { decisions });
    const done = decision === "approve" ? "Approved" : "Denied";
    const refused = [];
    for (const r of answer.results) {
      if (r.error) refused.push(`${r.id}: ${await explain(new ApiError(r.status, r.error), { id: r.id })}`);
    }
    alarm(`${done} ${answer.taken} of ${answer.results.length}.` +
      (refused.length ? ` Not ${done.toLowerCase()}: ${refused.join(" ")}` : ""), !refused.length);
    $("batch-reason").value = "";
    for (const id of Array.from(selected)) select(id, false);
  } catch (error) {
    alarm(await explain(error, {}));
  }
  await load();
}

// j / k move through the pending calls, Enter reviews one, x selects it; in the review, a
// approves and d goes to the deny reason. Never while typing.
function onKey(event) {
  if (event.ctrlKey || event.metaKey || event.altKey || !key) return;
  const typing = event.target.closest && event.target.closest("input, textarea, select");
  if (typing) return;
  if ($("decide").open) {
    if (event.key === "a" && !$("approve").disabled) { event.preventDefault(); approve(); }
    if (event.key === "d") { event.preventDefault(); $("deny-reason").focus(); }
    return;
  }
  const cards = Array.from(document.querySelectorAll("#pending > li.card"));
  const at = cards.findIndex((c) => c.contains(document.activeElement));
  const action = at >= 0 && pendingAll.find((a) => a.id === cards[at].dataset.actionId);
  if (event.key === "j" || event.key === "k") {
    event.preventDefault();
    const next = cards[Math.min(Math.max(at + (event.key === "j" ? 1 : -1), 0), cards.length - 1)];
    if (!next) return;
    cards.forEach((c) => c.classList.toggle("current", c === next));
    next.focus();
    next.scrollIntoView({ block: "nearest" });
  } else if (event.key === "Enter" && action && document.activeElement === cards[at]) {
    event.preventDefault();
    openDecision(action);
  } else if (event.key === "x" && action) {
    event.preventDefault();
    select(action.id, !selected.has(action.id));
  }
}

// ---- decision insights (admins) ---------------------------------------------------------

let adminKey = null; // held in memory only, never stored: the panel is for this look

function duration(seconds) {
  if (seconds === null || seconds === undefined) return "—";
  if (seconds < 60) return `${Math.round(seconds)} s`;
  if (seconds < 3600) return `${Math.round(seconds / 60)} min`;
  return `${(seconds / 3600).toFixed(1)} h`;
}

async function showInsights() {
  if (!adminKey) return;
  const to = new Date();
  const from = new Date(to.getTime() - Number($("insights-range").value) * 86400000);
  const path = `insights?from=${encodeURIComponent(from.toISOString())}&to=${encodeURIComponent(to.toISOString())}`;
  try {
    const i = await api("GET", path, undefined, adminKey);
    $("insights-rows").replaceChildren(...i.rows.map((r) => el("tr", {},
      el("td", { text: r.tool }), el("td", { text: r.rule || "—" }),
      el("td", { text: String(r.requests) }), el("td", { text: String(r.approved) }),
      el("td", { text: String(r.denied) }), el("td", { text: String(r.expired) }),
      el("td", { text: r.approval_rate === null ? "—" : `${Math.round(r.approval_rate * 100)} %` }),
      el("td", { text: duration(r.median_seconds_to_decide) }),
      el("td", { text: duration(r.p90_seconds_to_decide) }),
      el("td", { text: String(r.grant_uses) }))));
    $("insights-note").textContent = i.rows.length ? `From ${i.read} actions read` +
      (i.complete ? "." : `; the range held more: these cover from ${utc(i.covered_from)}.`)
      : "No call asked a person in this range.";
    $("insights").hidden = false;
  } catch (error) {
    $("insights-note").textContent = await explain(error, {});
  }
}

function renderScheduled(action) {
  return card(action, (item) => {
    const cancel = el("button", { type: "button", class: "danger", text: "Cancel",
      "aria-label": `Cancel ${action.tool} from ${action.agent_id}` });
    cancel.addEventListener("click", () => cancelAction(action));
    item.append(el("div", { class: "actions" }, cancel));
  });
}

function renderSealed(action) {
  return card(action, (item) => {
    const why = action.outcome && action.outcome.reason;
    const reason = why ? ` · ${why.replace(/_/g, " ")}` : "";
    item.append(el("p", { class: "meta" }, text("Sealed "), when(action.sealed_at), text(reason)));
  });
}

// Every page of a list: a page may be short or even empty and still have a `next_cursor`
// (a list the store cannot index reads a bounded slice per request), so only its absence ends it.
async function everyPage(path) {
  const all = [];
  let cursor = null;
  do {
    const page = await api("GET", cursor ? `${path}&cursor=${encodeURIComponent(cursor)}` : path);
    all.push(...page.data);
    cursor = page.next_cursor;
  } while (cursor);
  return all;
}

let loads = 0; // the latest load's number: an older answer arriving late is not drawn

// Reads the board and draws it. `quiet` is the self-refresh: it says nothing while it reads,
// and a failure is a line in the status, not an alert over the reviewer's work.
async function load(quiet) {
  const number = ++loads;
  if (!quiet) say("Loading…");
  try {
    const [pending, scheduled, recent, grants] = await Promise.all([
      everyPage("actions?state=pending_approval&limit=100"),
      everyPage("actions?state=approved&limit=100"),
      api("GET", "actions?limit=50"),
      api("GET", "grants"),
    ]);
    if (number !== loads) return true;
    const place = readingPlace();
    pendingAll = pending;
    drawPending();
    fill("scheduled", scheduled, renderScheduled);
    fill("sealed", recent.data.filter((a) => a.sealed_at).slice(0, 20), renderSealed);
    drawGrants(grants.grants);
    keepPlace(place);
    say("");
    $("updated").replaceChildren(text("Updated "), when(new Date().toISOString()), text("."));
    await openLinked(pending);
    return true;
  } catch (error) {
    // A lapsed sign-in says so itself, and offers to sign in again.
    if (error.code === "unauthenticated" && lapsed()) return false;
    if (quiet) {
      say(`Not refreshed: ${await explain(error, {})}`);
    } else {
      alarm(await explain(error, {}));
      say("");
    }
    return false;
  }
}

// The first card still on screen and how far it is from the top of the screen.
function readingPlace() {
  for (const node of document.querySelectorAll("#board li.card")) {
    const box = node.getBoundingClientRect();
    if (box.bottom > 0) return { list: node.parentElement.id, id: node.dataset.actionId, top: box.top };
  }
  return null;
}

// After a redraw, scroll so that card is where it was: cards arriving or leaving above it do
// not move what the reviewer reads. (The page does this itself rather than rely on CSS scroll
// anchoring, which not every browser has; app.css turns that off so the two never add up.)
function keepPlace(place) {
  const node = place && $(place.list).querySelector(`li[data-action-id="${place.id}"]`);
  if (node) window.scrollBy(0, node.getBoundingClientRect().top - place.top);
}

// The board refreshes itself while the tab is shown, and at once when it is shown again.
const REFRESH_EVERY_MS = 15000;

function refreshQuietly() {
  if (key && !document.hidden) load(true);
}

// A notification links to `/ui/#action=<id>`: open that action's dialog once the list is in.
// The fragment never reaches the server, and it names an action, never a key.
// The action itself is read, not looked for in the list: the list may have been read a
// moment before the action began to wait, and only the action says what it is now.
async function openLinked(pending) {
  const linked = /^#action=(act_[0-9A-Za-z]+)$/.exec(location.hash);
  if (!linked || $("decide").open) return;
  history.replaceState(null, "", location.pathname + location.search);
  let action = pending.find((a) => a.id === linked[1]);
  try {
    action = action || await api("GET", `actions/${encodeURIComponent(linked[1])}`);
  } catch (error) {
    alarm(await explain(error, { id: linked[1] }));
    return;
  }
  if (action.state === "pending_approval") {
    openDecision(action);
  } else {
    alarm(`${action.id} ${stateWords(action.state)}: it is no longer waiting for a ` +
      "countersignature; see the lists below.");
  }
}

// ---- deciding ----------------------------------------------------------------------------

function row(list, term, value) {
  list.append(el("dt", { text: term }), el("dd", {}, value));
}

async function openDecision(action) {
  const context = action.approval.context;
  const shown = $("decide-context");
  shown.replaceChildren();
  row(shown, "Tool", document.createTextNode(context.tool));
  row(shown, "Agent", document.createTextNode(context.agent_id));
  if (context.action_kind) row(shown, "Kind", document.createTextNode(context.action_kind));
  row(shown, "Window", document.createTextNode(
    context.schedule ? context.schedule.summary : "none — runs as soon as it is approved"));
  row(shown, "Expires", span(countdown(action.approval.expires_at), text(" · "),
    when(action.approval.expires_at)));
  const rule = ruleText(action), quorum = quorumText(action);
  if (rule) row(shown, "Why it waits", document.createTextNode(rule));
  if (quorum) row(shown, "Approvals", document.createTextNode(quorum));
  row(shown, "Arguments", el("pre", { text: pretty(context.args) }));
  $("decide-error").hidden = true;
  $("deny-reason").value = "";
  $("approve").disabled = true;
  current = { action, digest: null };
  offerGrant(action);
  // Opened on its title (autofocus) and scrolled to its top: the call is read before any
  // button. Focus never jumps to Approve, which would scroll the call out of view.
  $("decide").showModal();
  $("decide").scrollTop = 0;
  $("decide-title").focus();
  try {
    // The digest of exactly what the dialog shows, computed here, not copied from the server.
    const digest = await digestOf(context);
    current.digest = digest;
    $("decide-digest").textContent = digest;
    if (digest !== action.approval.context_digest) {
      decisionError("This page cannot reproduce the digest of what it shows, so it will not " +
        "approve. Use the countersign CLI, or reload the page.");
      return;
    }
    $("approve").disabled = false;
  } catch (e) {
    decisionError("This browser cannot compute SHA-256 here (the page needs https or localhost).");
  }
}

function decisionError(message) {
  const box = $("decide-error");
  box.textContent = message;
  box.hidden = false;
}

async function decide(method, body, done) {
  const { action } = current;
  for (const b of ["approve", "deny"]) $(b).disabled = true;
  try {
    const result = await api("POST", `actions/${encodeURIComponent(action.id)}/${method}`, body);
    $("decide").close();
    alarm(done(result), true);
    await load();
  } catch (error) {
    decisionError(await explain(error, action));
    $("deny").disabled = false;
    // A term the server refused (a grant's, say) can be corrected and sent again; any other
    // refusal means the call itself changed, and the dialog no longer shows what waits.
    $("approve").disabled = error.code !== "validation_failed";
    await load();
  }
}

function approve() {
  if (!current || !current.digest) return;
  let grant;
  try {
    grant = grantAsked();
  } catch (e) {
    decisionError(e.message);
    return;
  }
  const body = { context_digest: current.digest };
  if (grant) body.grant = grant;
  decide("approve", body, (a) => `Approved ${a.tool} (${a.id}); ${afterApproval(a)}.` +
    (grant && a.grant ? ` ${grantedText(a.grant)}` : ""));
}

// ---- a scoped grant with the approval (docs/grants.md) -----------------------------------

const TTL_WORDS = { "15m": "15 minutes", "1h": "1 hour", "8h": "8 hours", "24h": "1 day",
  "168h": "7 days", "720h": "30 days" };

function plural(n, one, many) {
  return `${n} ${n === 1 ? one : many}`;
}

// "90m", "1h", "168h" in seconds (the options' values are whole minutes or hours).
function ttlSeconds(value) {
  const n = Number(value.slice(0, -1));
  return value.endsWith("h") ? n * 3600 : n * 60;
}

// A pinned value as one short line: the approver sees which value later calls must repeat.
function shortValue(value) {
  const shown = JSON.stringify(value);
  return shown.length > 60 ? `${shown.slice(0, 59)}…` : shown;
}

// The grant controls of the dialog, fresh for each call: off, the defaults, one checkbox per
// argument of this call to pin.
function offerGrant(action) {
  const context = action.approval.context;
  const args = context.args && typeof context.args === "object" && !Array.isArray(context.args)
    ? context.args : {};
  $("grant").open = false;
  $("grant-on").checked = false;
  $("grant-ttl").value = "1h";
  $("grant-uses").value = "1";
  $("grant-when").value = "";
  const pins = $("grant-pins");
  pins.replaceChildren(pins.querySelector("legend"), ...Object.keys(args).sort(byCodePoint).map(
    (field) => el("label", { class: "check" }, el("input", { type: "checkbox", "data-pin": field }),
      text(`${field} = ${shortValue(args[field])}`))));
  pins.hidden = !Object.keys(args).length;
  const rule = context.policy || {};
  const asked = (action.approvals || []).find((s) => s.grant);
  let quorum = (rule.approvals || 1) > 1
    ? ` This rule needs ${rule.approvals} approvers: a grant is given only if the rule says ` +
      "grantable = true and each of them asks for it with the same terms." : "";
  if (asked) {
    // An earlier approval asked a grant: its terms are the ones to ask alike, set below.
    const g = asked.grant;
    const ttl = Object.keys(TTL_WORDS).find((v) => ttlSeconds(v) === g.ttl_seconds);
    $("grant").open = true;
    $("grant-on").checked = true;
    if (ttl) $("grant-ttl").value = ttl;
    $("grant-uses").value = String(g.uses);
    for (const box of document.querySelectorAll("#grant-pins input")) {
      box.checked = (g.pin || []).includes(box.dataset.pin);
    }
    $("grant-when").value = g.when || "";
    quorum += ` ${asked.approver} asked for the grant set below with their approval.`;
  }
  $("grant-scope").textContent = `Only ${context.agent_id}'s ${context.tool} calls that ` +
    `${rule.label ? `the rule “${rule.label}”` : "the same rule"} would hold for a person; a call ` +
    `a rule denies is still denied.${quorum}`;
  grantChanged();
}

// What the approver asks for, or null: read from the controls, the count checked here so a
// typo says so before anything is sent (the server judges every term again).
function grantAsked() {
  if (!$("grant-on").checked) return null;
  const uses = Number($("grant-uses").value);
  if (!Number.isInteger(uses) || uses < 1 || uses > 1000) {
    throw new Error("A grant allows 1 to 1,000 further calls: enter a whole number.");
  }
  const pin = Array.from(document.querySelectorAll("#grant-pins input:checked"), (b) => b.dataset.pin);
  const grant = { ttl: $("grant-ttl").value, uses, pin };
  const when = $("grant-when").value.trim();
  if (when) grant.when = when;
  return grant;
}

// The terms in one sentence, beside the controls and on the Approve button.
function grantChanged() {
  const on = $("grant-on").checked;
  $("grant-terms").disabled = !on;
  $("approve").textContent = on ? "Approve and grant" : "Approve";
  if (!on || !current) {
    $("grant-summary").textContent = "No grant: only this call is approved.";
    return;
  }
  const { context } = current.action.approval;
  const args = context.args || {};
  const uses = Number($("grant-uses").value);
  const pins = Array.from(document.querySelectorAll("#grant-pins input:checked"), (b) => b.dataset.pin);
  const when = $("grant-when").value.trim();
  $("grant-summary").textContent = `Grants ${context.agent_id} ` +
    `${Number.isInteger(uses) ? plural(uses, "further call", "further calls") : "further calls"} of ` +
    `${context.tool} for ${TTL_WORDS[$("grant-ttl").value]} from this approval` +
    (pins.length ? `, repeating ${pins.map((f) => `${f} = ${shortValue(args[f])}`).join(", ")}`
      : ", with any arguments") +
    (when ? `, only when ${when}` : "") + ".";
}

function grantedText(terms) {
  return `Granted ${terms.agent_id} ${plural(terms.uses, "further call", "further calls")} of ` +
    `${terms.tool} (${terms.id}).`;
}

// ---- the tenant's grants: uses left, revoke ---------------------------------------------

// Not revoked, a use left, unexpired: it may allow calls again (a lapsed one, once its
// granter may decide again), so it can be revoked.
function revocable(g) {
  return !g.revoked && g.uses_left > 0 && Date.parse(g.terms.expires_at) > Date.now();
}

function grantState(g) {
  if (g.revoked) return "revoked";
  if (g.active) return "active";
  if (g.lapsed && revocable(g)) return "lapsed";
  return g.uses_left ? "expired" : "used up";
}

function renderGrant(g) {
  const t = g.terms;
  const item = el("li", { class: "card", "data-action-id": g.id });
  item.append(
    el("h3", {}, el("span", { text: `${t.tool} from ${t.agent_id}` }), text(" "),
      el("span", { class: "state", text: grantState(g) })),
    el("p", { class: "meta uses", text: `${g.uses_left} of ${plural(t.uses, "use", "uses")} left · ${g.id}` }),
    el("p", { class: "meta" }, text(revocable(g) ? "Until " : "Ended "), when(t.expires_at),
      ...(revocable(g) ? [text(" · "), countdown(t.expires_at)] : [])),
    el("p", { class: "meta" }, text(`Granted by ${signerText(t.granted_by.approver, t.granted_by.person)} on `),
      when(t.granted_at), text(` with the approval of ${t.from_action} · rule #${t.rule} “${t.rule_label}”`)),
  );
  const pinned = Object.entries(t.pins || {});
  item.append(el("p", { class: "meta", text: pinned.length
    ? `Only calls repeating ${pinned.map(([f, v]) => `${f} = ${shortValue(v)}`).join(", ")}`
    : "Any arguments" }));
  if (t.when) item.append(el("p", { class: "meta", text: `Only when ${t.when}` }));
  if (g.revoked) {
    item.append(el("p", { class: "meta" },
      text(`Revoked by ${signerText(g.revoked.by, g.revoked.person)} after ` +
        `${plural(g.revoked.after_uses, "use", "uses")} `), when(g.revoked.at)));
  }
  if (g.lapsed && revocable(g)) {
    item.append(el("p", { class: "meta", text: `It allows nothing while ${t.granted_by.approver} ` +
      "may no longer decide (their key was removed or left the grant's groups)." }));
  }
  if (revocable(g)) {
    const revoke = el("button", { type: "button", class: "danger", text: "Revoke",
      "aria-label": `Revoke the grant of ${t.tool} to ${t.agent_id} (${g.id})` });
    revoke.addEventListener("click", () => revokeGrant(g));
    item.append(el("div", { class: "actions" }, revoke));
  }
  return item;
}

// The live grants, then the ten latest that ended: the list is for deciding what to revoke.
function drawGrants(grants) {
  const live = grants.filter(revocable);
  fill("grants", [...live, ...grants.filter((g) => !revocable(g)).slice(0, 10)], renderGrant);
  $("grants-count").textContent = `(${grants.filter((g) => g.active).length} active)`;
}

async function revokeGrant(g) {
  const t = g.terms;
  if (!window.confirm(`Revoke ${g.id}? ${t.agent_id} will ask a person again for ${t.tool}.`)) return;
  try {
    const r = await api("DELETE", `grants/${encodeURIComponent(g.id)}`);
    const after = r.revoked ? r.revoked.after_uses : t.uses - r.uses_left;
    alarm(`Revoked ${g.id}: ${plural(after, "call", "calls")} used it before; none will now.`, true);
  } catch (error) {
    alarm(error.code === "not_found" ? "This grant no longer exists." : await explain(error, {}));
  }
  await load();
}

function deny() {
  const reason = $("deny-reason").value.trim();
  if (!reason) {
    decisionError("Give a reason to deny; it is recorded in the audit trail.");
    $("deny-reason").focus();
    return;
  }
  decide("deny", { reason }, (a) => `Denied ${a.tool} (${a.id}).`);
}

async function cancelAction(action) {
  if (!window.confirm(`Cancel ${action.tool} (${action.id})? It will never run.`)) return;
  try {
    const a = await api("POST", `actions/${encodeURIComponent(action.id)}/cancel`);
    alarm(`Cancelled ${a.tool} (${a.id}); it will not run.`, true);
  } catch (error) {
    alarm(await explain(error, action));
  }
  await load();
}

// ---- signing in and out ------------------------------------------------------------------

function show(signedIn) {
  $("sign-in-view").hidden = signedIn;
  $("board").hidden = !signedIn;
  $("session").hidden = !signedIn;
}

function signOut() {
  forget();
  say("Signed out.");
  offerProviders($("providers"));
}

// The credential and what came with it, gone from the tab.
function forget() {
  key = null;
  sessionStorage.removeItem(KEY_SLOT);
  sessionStorage.removeItem(VIA_SLOT);
  sessionStorage.removeItem("countersign.zone");
  $("key").value = "";
  $("updated").textContent = "";
  $("who").textContent = "";
  show(false);
}

// The server no longer takes the credential. A provider's token lapses by design: the person
// signs in again and comes back to the action they were reviewing (answers true). A key the
// server no longer takes just signs out (answers false).
function lapsed() {
  const via = signedInVia();
  const place = current ? `#action=${current.action.id}` : location.hash;
  if ($("decide").open) $("decide").close();
  if (!via) {
    signOut();
    return false;
  }
  forget();
  $("providers").replaceChildren();
  const again = el("button", { type: "button", class: "primary", text: `Sign in again with ${via.name}` });
  again.addEventListener("click", () => startSignIn(via, again, place));
  $("providers").append(again);
  $("providers").hidden = false;
  alarm(`Your sign-in with ${via.name} has lapsed. Sign in again to carry on where you were.`);
  again.focus();
  return true;
}

async function signIn(event) {
  event.preventDefault();
  const typed = $("key").value.trim();
  if (!typed) {
    alarm("Enter your approver key.");
    $("key").focus();
    return;
  }
  alarm("");
  if (await useCredential(typed, "key")) {
    $("key").value = "";
  } else {
    $("key").focus();
  }
}

// Signed in with `credential` — a key or a provider's token — if it is an approver's and the
// board loads.
async function useCredential(credential, kind) {
  key = credential;
  // Only approvers countersign: any other credential is refused here, before the page offers
  // an Approve button that the server would refuse.
  let me;
  try {
    me = await api("GET", "me");
    if (me.role !== "approver") {
      key = null;
      const article = /^[aeiou]/.test(me.role) ? "an" : "a";
      const admin = me.role === "admin";
      alarm((kind === "key"
        ? `This is ${article} ${me.role} key (${me.key_id}); ` +
          "only an approver key can countersign. Sign in with an approver key."
        : `You are signed in as ${me.key_id}, ${article} ${me.role}; only an approver can ` +
          "countersign.") + (admin ? " Decision insights for admins are below." : ""));
      // An admin sees the decision insights (SC-GR-22), the credential held only in memory.
      adminKey = admin ? credential : null;
      if (admin) $("key").value = "";
      $("insights").hidden = true;
      if (admin) await showInsights();
      return false;
    }
    adminKey = null;
    $("insights").hidden = true;
    tenantZone = me.time_zone;
    sessionStorage.setItem("countersign.zone", tenantZone);
  } catch (error) {
    key = null;
    alarm(await explain(error, {}));
    return false;
  }
  if (!(await load())) {
    key = null;
    return false;
  }
  sessionStorage.setItem(KEY_SLOT, key);
  whoText(me);
  show(true);
  $("refresh").focus();
  return true;
}

function whoText(me) {
  const via = signedInVia();
  $("who").textContent = via ? `${me.key_id} · signed in with ${via.name}` : `key ${me.key_id}`;
}

document.addEventListener("DOMContentLoaded", () => {
  $("sign-in").addEventListener("submit", signIn);
  $("sign-out").addEventListener("click", signOut);
  $("refresh").addEventListener("click", () => { alarm(""); load(); });
  $("approve").addEventListener("click", approve);
  $("deny").addEventListener("click", deny);
  $("close-dialog").addEventListener("click", () => $("decide").close());
  $("filter-tool").addEventListener("change", drawPending);
  $("filter-agent").addEventListener("change", drawPending);
  $("approve-selected").addEventListener("click", () => decideSelected("approve"));
  $("deny-selected").addEventListener("click", () => decideSelected("deny"));
  $("insights-range").addEventListener("change", showInsights);
  $("grant-on").addEventListener("change", grantChanged);
  $("grant").addEventListener("input", grantChanged);
  document.addEventListener("keydown", onKey);
  $("decide").addEventListener("close", () => { current = null; });
  window.addEventListener("hashchange", () => { if (key) load(); });
  document.addEventListener("visibilitychange", refreshQuietly);
  setInterval(refreshQuietly, REFRESH_EVERY_MS);
  start();
});

async function start() {
  const token = await finishSignIn();
  if (token) {
    if (await useCredential(token, "token")) return;
    sessionStorage.removeItem(VIA_SLOT);
  }
  if (key) {
    show(true);
    if (await load()) api("GET", "me").then(whoText, () => {});
    return;
  }
  show(false);
  await offerProviders($("providers"));
  if (!token && !$("alert").textContent) $("key").focus();
}
