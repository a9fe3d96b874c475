// mockskill's dashboard: polls the /__admin JSON endpoints and draws them.
// Plain JS, no dependencies, no build step. Data is only ever put in the page
// as text (textContent, SVG attributes), never as markup: session names and
// paths come from whoever sends requests to the server.
"use strict";

(() => {
  const TOKEN_KEY = "mockskill-admin-token";
  const POLL_MS = 1000;
  const JOURNAL_ROWS = 200; // rows kept in the live journal
  // The journal is asked for entries started since the newest one seen, less
  // this much: an entry is recorded when it finishes, so a slow request shows
  // up after quicker ones that started later.
  const JOURNAL_SLACK_S = 60;
  // Ticks between two reports on every session (a big one: all chains of all sessions), or
  // at the next tick when the journal shows a new session.
  const SESSIONS_EVERY = 5;
  const HEALTH_EVERY = 5; // ticks between two looks at health and scenarios
  const CHAINS_SHOWN = 20; // the newest chains of a session drawn
  const CATEGORIES = [
    "VALIDATION_ERROR", "AUTH_REQUIRED", "PERMISSION_DENIED", "SKILL_NOT_FOUND",
    "EXECUTION_TIMEOUT", "ENDPOINT_UNREACHABLE", "VERSION_INCOMPATIBLE",
  ];
  const SVG_NS = "http://www.w3.org/2000/svg";
  // Centre to centre, the least distance between two attempts' marks in a chain's plot (a
  // mark's radius is 7 at most): attempts milliseconds apart stay two marks, side by side.
  const MARK_GAP = 17;
  const LABEL_ROWS = 4; // rows of labels above a chain's marks, at most

  const $ = (id) => document.getElementById(id);

  /** An HTML element: el("li", {class: "x"}, "text", child, ...). */
  function el(tag, attrs, ...children) {
    return build(document.createElement(tag), attrs, children);
  }

  /** An SVG element, the same way. */
  function sv(tag, attrs, ...children) {
    return build(document.createElementNS(SVG_NS, tag), attrs, children);
  }

  function build(node, attrs, children) {
    for (const [key, value] of Object.entries(attrs || {})) {
      if (value !== null && value !== undefined && value !== false) node.setAttribute(key, value);
    }
    for (const child of children) {
      if (child === null || child === undefined || child === false) continue;
      node.append(typeof child === "string" || typeof child === "number" ? String(child) : child);
    }
    return node;
  }

  const state = {
    tick: 0,
    paused: false,
    waitingForToken: false,
    selected: null,
    journal: new Map(), // id -> entry
    newestStarted: null,
    journalSize: -1,
    sessions: new Map(), // name -> {requests, findings, clean}
    reportMissing: false,
    scenariosEndpoint: true,
    newSession: false, // the journal showed a session the last report did not have
    drawn: "", // the session report last drawn, as JSON
  };

  class TokenNeeded extends Error {}

  class Missing extends Error {}

  async function api(path) {
    const headers = { Accept: "application/json" };
    const token = sessionStorage.getItem(TOKEN_KEY);
    if (token) headers.Authorization = `Bearer ${token}`;
    const response = await fetch(path, { headers, cache: "no-store" });
    if (response.status === 401) throw new TokenNeeded();
    if (response.status === 404) throw new Missing(path);
    if (!response.ok) {
      let message = response.statusText;
      try {
        message = (await response.json()).error.message;
      } catch (_) {
        // not the unified error body: keep the status text
      }
      throw new Error(`${path.split("?")[0]}: ${response.status} ${message}`);
    }
    return response.json();
  }

  // -- formatting ---------------------------------------------------------------------------

  function ms(value) {
    if (value === null || value === undefined) return "–";
    if (Math.abs(value) >= 1000) return `${(value / 1000).toFixed(value % 1000 === 0 ? 0 : 2)} s`;
    return `${Math.round(value)} ms`;
  }

  function plural(count, noun) {
    return `${count} ${noun}${count === 1 ? "" : "s"}`;
  }

  function clock(epoch) {
    const d = new Date(epoch * 1000);
    const pad = (n, w = 2) => String(n).padStart(w, "0");
    const time = [d.getHours(), d.getMinutes(), d.getSeconds()].map((n) => pad(n)).join(":");
    return `${time}.${pad(d.getMilliseconds(), 3)}`;
  }

  function outcome(attempt) {
    if (attempt.fault) return attempt.fault;
    if (attempt.status === null || attempt.status === undefined) {
      return attempt.client_timeout_ms !== null && attempt.client_timeout_ms !== undefined
        ? "client left" : "no answer";
    }
    return String(attempt.status);
  }

  // -- status line, pause, token ------------------------------------------------------------

  function setStatus(kind, text) {
    const node = $("status");
    node.className = `status ${kind}`;
    node.textContent = text;
  }

  function askForToken(refused) {
    state.waitingForToken = true;
    setStatus("error", "admin token needed");
    $("token-error").hidden = !refused;
    $("token-error").textContent = refused ? "That token was refused; try again." : "";
    $("token-dialog").hidden = false;
    $("token").focus();
  }

  $("token-form").addEventListener("submit", (event) => {
    event.preventDefault();
    const token = $("token").value.trim();
    if (!token) return;
    sessionStorage.setItem(TOKEN_KEY, token);
    $("token").value = "";
    $("token-dialog").hidden = true;
    $("forget-token").hidden = false;
    state.waitingForToken = false;
    state.tick = 0; // everything again, now that it can be read
    poll();
  });

  $("forget-token").addEventListener("click", () => {
    sessionStorage.removeItem(TOKEN_KEY);
    $("forget-token").hidden = true;
    askForToken(false);
  });

  $("pause").addEventListener("click", () => {
    state.paused = !state.paused;
    $("pause").textContent = state.paused ? "Resume" : "Pause";
    if (state.paused) setStatus("paused", "paused");
    else poll();
  });

  // -- polling ------------------------------------------------------------------------------

  let timer = null;

  async function poll() {
    clearTimeout(timer);
    if (state.paused || state.waitingForToken) return;
    const tick = state.tick++;
    try {
      const jobs = [pollJournal()];
      if (tick % HEALTH_EVERY === 0) jobs.push(pollHealth());
      if (tick % SESSIONS_EVERY === 0 || state.newSession) {
        state.newSession = false;
        jobs.push(pollSessions());
      }
      await Promise.all(jobs);
      await pollSession(); // after the others: they may have chosen the session
      setStatus("live", `live · ${clock(Date.now() / 1000).slice(0, 8)}`);
    } catch (error) {
      if (error instanceof TokenNeeded) {
        const refused = sessionStorage.getItem(TOKEN_KEY) !== null;
        sessionStorage.removeItem(TOKEN_KEY); // a wrong one is not kept for the next visit
        $("forget-token").hidden = true;
        askForToken(refused);
        return;
      }
      setStatus("error", error.message || String(error));
      console.error("mockskill dashboard:", error); // with its stack, for the developer tools
    }
    if (!state.paused && !state.waitingForToken) timer = setTimeout(poll, POLL_MS);
  }

  async function pollHealth() {
    const health = await api("health");
    $("server").textContent = `v${health.version} · seed ${health.seed}`;
    let scenarios = (health.scenarios || []).map((name) => ({ name, active: true }));
    if (state.scenariosEndpoint) {
      try {
        const listing = await api("scenarios");
        scenarios = (listing.scenarios || listing).map((s) =>
          typeof s === "string" ? { name: s, active: true } : s);
      } catch (error) {
        if (!(error instanceof Missing)) throw error;
        state.scenariosEndpoint = false; // an older server: health's list it is
      }
    }
    const list = $("scenarios");
    list.replaceChildren(...scenarios.map((s) => {
      const active = s.active !== false;
      return el("li", { class: active ? "active" : "inactive", title: s.description || null },
        el("span", { class: "dot" }), s.name,
        active ? null : el("span", { class: "muted" }, " (inactive)"));
    }));
    if (!scenarios.length) list.replaceChildren(el("li", { class: "muted" }, "none served"));
    if (health.reload && health.reload.status === "failed") {
      list.append(el("li", { class: "bad" },
        "last reload failed: the previous scenarios are served"));
    }
  }

  async function pollJournal() {
    let query = `limit=${JOURNAL_ROWS}`;
    if (state.newestStarted !== null) query += `&since=${state.newestStarted - JOURNAL_SLACK_S}`;
    const answer = await api(`journal?${query}`);
    if (answer.size < state.journalSize) {
      // The journal shrank (a reset, of everything or of one session): start again.
      state.journal.clear();
      state.sessions.clear();
      state.newestStarted = null;
      state.journalSize = answer.size;
      state.tick = 0;
      return pollJournal();
    }
    state.journalSize = answer.size;
    let added = false;
    for (const entry of answer.entries) {
      if (state.journal.has(entry.id)) continue;
      state.journal.set(entry.id, entry);
      added = true;
      if (state.newestStarted === null || entry.started > state.newestStarted) {
        state.newestStarted = entry.started;
      }
      const known = state.sessions.get(entry.session);
      if (!known) {
        state.newSession = true;
        state.sessions.set(entry.session,
          { requests: null, findings: null, clean: null, last: entry.id });
      } else {
        known.last = Math.max(known.last || 0, entry.id);
      }
    }
    if (!added && $("journal").tBodies[0].rows.length) return;
    const newest = [...state.journal.values()].sort((a, b) => b.id - a.id).slice(0, JOURNAL_ROWS);
    state.journal = new Map(newest.map((e) => [e.id, e]));
    $("journal-count").textContent = `(${answer.size} recorded)`;
    // Replicas sharing one journal (--state redis://...): a column saying which served each.
    const replicas = new Set(newest.map((e) => e.replica).filter((r) => r));
    $("journal").classList.toggle("replicas", replicas.size > 1);
    $("journal").tBodies[0].replaceChildren(...newest.map(journalRow));
    if (state.selected === null && newest.length) select(newest[0].session);
    drawSessions();
  }

  function journalRow(entry) {
    const status = entry.status === null ? "" : String(entry.status);
    const kind = entry.fault || entry.status === null ? "fault"
      : entry.status >= 400 ? "err" : "ok";
    const took = (entry.finished - entry.started) * 1000;
    const row = el("tr", { class: kind, "data-id": entry.id, "data-session": entry.session },
      el("td", { class: "mono" }, clock(entry.started)),
      el("td", {}, entry.session),
      el("td", { class: "mono" }, `${entry.method} ${entry.path}`),
      el("td", { class: "mono" }, status),
      el("td", { class: "mono" }, entry.fault || entry.error_code || ""),
      el("td", { class: "num mono" }, took < 10 ? took.toFixed(1) : Math.round(took)),
      el("td", { class: "replica mono" }, entry.replica || ""));
    row.addEventListener("click", () => select(entry.session));
    return row;
  }

  async function pollSessions() {
    let report;
    try {
      report = await api("report");
    } catch (error) {
      if (!(error instanceof Missing)) throw error;
      state.reportMissing = true;
      return;
    }
    state.reportMissing = false;
    const known = new Map();
    for (const s of report.sessions || []) known.set(s.session, summarize(s));
    // Sessions the journal has shown since the report was made stay listed.
    for (const [name, summary] of state.sessions) {
      const fresh = known.get(name);
      if (!fresh) known.set(name, summary);
      else fresh.last = Math.max(fresh.last, summary.last || 0);
    }
    state.sessions = known;
    drawSessions();
  }

  /** What the sessions list shows of a session's report; last: its newest journal id. */
  function summarize(session) {
    const ids = (session.chains || []).flatMap((c) => c.attempts.map((a) => a.id));
    return {
      requests: session.requests, findings: (session.findings || []).length, clean: session.clean,
      last: Math.max(0, ...ids),
    };
  }

  function drawSessions() {
    // The most recently active first.
    const names = [...state.sessions.keys()].sort((a, b) =>
      (state.sessions.get(b).last || 0) - (state.sessions.get(a).last || 0) || a.localeCompare(b));
    $("no-sessions").hidden = names.length > 0;
    $("sessions").replaceChildren(...names.map((name) => {
      const s = state.sessions.get(name);
      const badge = s.findings ? el("span", { class: "badge bad", title: "findings" }, s.findings)
        : s.clean ? el("span", { class: "badge good", title: "no findings" }, "✓") : null;
      const selected = name === state.selected ? "selected" : null;
      const item = el("li", { "data-session": name, class: selected },
        el("span", { class: "name" }, name),
        s.requests === null ? null : el("span", { class: "muted" }, ` ${s.requests} req`), badge);
      item.addEventListener("click", () => select(name));
      return item;
    }));
  }

  function select(name) {
    if (name === state.selected) return;
    state.selected = name;
    state.drawn = "";
    history.replaceState(null, "", `#session=${encodeURIComponent(name)}`);
    drawSessions();
    pollSession().catch(() => {}); // the next tick reports what failed
  }

  async function pollSession() {
    const name = state.selected;
    if (name === null) return;
    $("session-title").textContent = `Session ${name}`;
    if (state.reportMissing) {
      $("session-summary").textContent =
        "This server has no retry audit (GET /__admin/report): only the journal is shown.";
      return;
    }
    let report;
    try {
      report = await api(`report?session=${encodeURIComponent(name)}`);
    } catch (error) {
      if (!(error instanceof Missing)) throw error;
      state.reportMissing = true;
      return;
    }
    if (name !== state.selected) return; // another was chosen meanwhile
    const session = (report.sessions || []).find((s) => s.session === name);
    const drawn = JSON.stringify(session || null);
    if (drawn === state.drawn) return; // unchanged: keep the page (and any tooltip) still
    state.drawn = drawn;
    if (session) {
      const summary = summarize(session);
      summary.last = Math.max(summary.last, (state.sessions.get(name) || {}).last || 0);
      state.sessions.set(name, summary);
      drawSessions();
    }
    drawSession(session, report.policy || {});
  }

  // -- one session: summary, findings, timeline, coverage -----------------------------------

  function drawSession(session, policy) {
    const summary = $("session-summary");
    if (!session) {
      summary.textContent = "No requests in this session (yet).";
      for (const id of ["findings", "timeline", "tasks", "streams", "coverage"]) {
        $(id).replaceChildren();
      }
      $("legend").hidden = true;
      return;
    }
    const findings = session.findings || [];
    summary.replaceChildren(
      `${plural(session.requests, "request")} · `,
      `${plural(session.chains.length, "retry chain")} · `,
      findings.length
        ? el("span", { class: "bad" }, plural(findings.length, "finding"))
        : el("span", { class: "good" }, "clean: no findings"),
      policy.tolerance_ms !== undefined
        ? ` · tolerance ${ms(policy.tolerance_ms)} or ${Math.round(policy.tolerance_ratio * 100)}%`
        : "");
    const numbers = new Map(); // attempt id -> finding numbers (1-based)
    findings.forEach((f, i) => {
      for (const id of f.attempts || []) numbers.set(id, [...(numbers.get(id) || []), i + 1]);
    });
    drawFindings(findings);
    drawTimeline(session, findings, numbers);
    drawTasks(session.tasks || [], findings, numbers);
    drawStreams(session.streams || [], findings, numbers);
    drawCoverage(session.coverage);
  }

  function drawFindings(findings) {
    const box = $("findings");
    if (!findings.length) {
      box.replaceChildren();
      return;
    }
    const items = findings.map((f, i) => {
      const item = el("li", { "data-rule": f.rule, "data-finding": i + 1 },
        el("span", { class: "rule" }, f.rule), " ", el("strong", {}, f.message),
        el("dl", {},
          el("dt", {}, "expected"), el("dd", {}, f.expected || ""),
          el("dt", {}, "found"), el("dd", {}, f.found || ""),
          el("dt", {}, "fix"), el("dd", {}, f.fix || "")));
      const marks = () => document.querySelectorAll((f.attempts || [])
        .flatMap((id) => ["#timeline", "#tasks", "#streams"]
          .map((box) => `${box} [data-id="${Number(id)}"]`))
        .join(",") || "#none");
      item.addEventListener("mouseenter", () => marks().forEach((m) => m.classList.add("hl")));
      item.addEventListener("mouseleave", () => marks().forEach((m) => m.classList.remove("hl")));
      return item;
    });
    box.replaceChildren(el("h3", {}, "Findings"), el("ol", { class: "findings" }, ...items));
  }

  /** Round steps for an axis of *span* ms: 1, 2 or 5 times a power of ten. */
  function step(span) {
    const rough = span / 6;
    const power = 10 ** Math.floor(Math.log10(rough));
    return [1, 2, 5, 10].map((m) => m * power).find((s) => s >= rough);
  }

  function drawTimeline(session, findings, numbers) {
    const box = $("timeline");
    const chains = session.chains || [];
    const first = Math.max(0, chains.length - CHAINS_SHOWN);
    const shown = chains.slice(first).map((chain, i) => ({ chain, index: first + i }));
    const parts = [el("h3", {}, "Retry timeline")];
    if (first > 0) {
      const note = `The newest ${shown.length} of ${chains.length} chains.`;
      parts.push(el("p", { class: "muted" }, note));
    }
    // A chain of one attempt has no retry to draw: all of them share one compact row, so
    // that a session of many plain calls does not bury the chains that retried.
    const singles = shown.filter(({ chain }) => chain.attempts.length === 1);
    if (singles.length) parts.push(drawSingles(singles, findings, numbers));
    for (const { chain, index } of shown) {
      if (chain.attempts.length > 1) parts.push(drawChain(chain, findings, numbers, index));
    }
    box.replaceChildren(...parts);
    $("legend").hidden = false;
    $("legend").replaceChildren(legend());
  }

  /** A chain's attempts, numbered, with how long each took and when it ended (ms). */
  function attemptsOf(chain) {
    return chain.attempts.map((a, i) => {
      const duration = Math.max(0, (a.finished - a.started) * 1000);
      return { ...a, n: i + 1, duration, end: a.offset_ms + duration };
    });
  }

  function kindOf(a) {
    return a.fault || a.status === null ? "fault"
      : a.status < 400 ? "ok" : a.retryable ? "retryable" : "fatal";
  }

  /** What a mark's tooltip says about attempt *a*. */
  function describe(a, found, findings) {
    const lines = [
      `attempt ${a.n} (journal #${a.id}) at +${ms(a.offset_ms)}: ${outcome(a)}`
        + `${a.error_code ? ` ${a.error_code}` : ""}, took ${ms(a.duration)}`,
    ];
    if (a.wait_ms !== null && a.wait_ms !== undefined) {
      lines.push(`waited ${ms(a.wait_ms)}`
        + (a.expected_wait_ms !== null && a.expected_wait_ms !== undefined
          ? ` (the protocol asked for at least ${ms(a.expected_wait_ms)})` : ""));
    }
    if (a.stands_for && a.stands_for !== a.error_code) lines.push(`counts as ${a.stands_for}`);
    if (a.client_timeout_ms !== null && a.client_timeout_ms !== undefined) {
      lines.push(`the client left after ${ms(a.client_timeout_ms)}`);
    }
    for (const n of found || []) {
      lines.push(`⚑${n} ${findings[n - 1].rule}: ${findings[n - 1].message}`);
    }
    return lines.join("\n");
  }

  function drawSingles(singles, findings, numbers) {
    const items = singles.map(({ chain, index }) => {
      const a = attemptsOf(chain)[0];
      const found = numbers.get(a.id);
      const dot = sv("svg", { viewBox: "0 0 16 16", width: 14, height: 14, class: "single-dot" },
        sv("circle", {
          cx: 8, cy: 8, r: found ? 6 : 5, class: `attempt ${kindOf(a)}${found ? " finding" : ""}`,
          "data-id": a.id, "data-attempt": 1,
        }, sv("title", {}, describe(a, found, findings))));
      return el("span", { class: `single${found ? " finding" : ""}`, "data-id": a.id },
        dot, el("span", { class: "mono" }, chain.endpoint),
        el("span", {}, `${outcome(a)}${a.error_code ? ` ${a.error_code}` : ""}`),
        found ? el("b", { class: "bad" }, `⚑${found.join(",")}`) : null,
        el("span", { class: "muted" }, `chain ${index + 1}`));
    });
    const head = el("div", { class: "chain-head" },
      el("span", { class: "muted" }, `${plural(singles.length, "single-attempt chain")}`
        + " (answered at the first attempt, or never retried)"));
    return el("div", { class: "chain singles" }, head, el("div", { class: "single-list" }, ...items));
  }

  /** About how wide *text* is, drawn at *size* px (over-estimated: wide glyphs, fallbacks). */
  function textWidth(text, size) {
    return [...text].length * size * 0.62 + 2;
  }

  function drawChain(chain, findings, numbers, index) {
    // Rows, top down: two rows of labels, the attempts' lane, the waits (as many rows as
    // it takes for no two to overlap: waits overlap when retries come early), the axis.
    const attempts = attemptsOf(chain);
    // Where the protocol allows each retry: the previous answer's end plus the wait it asked for.
    attempts.forEach((a, i) => {
      if (i > 0 && a.expected_wait_ms !== null && a.expected_wait_ms !== undefined) {
        a.waitFrom = attempts[i - 1].end;
        a.earliest = a.waitFrom + a.expected_wait_ms;
      }
    });
    const W = 900, left = 14, right = 24;
    const span = Math.max(100, ...attempts.map((a) => Math.max(a.end, a.earliest || 0))) * 1.04;
    const x = (t) => left + (t / span) * (W - left - right);
    // Each mark where its attempt started, but at least MARK_GAP after the one before (and
    // back from the right edge if that pushed it over): a mark nudged off its time keeps a
    // line to it, and its tooltip says the time.
    attempts.forEach((a, i) => {
      a.mx = i ? Math.max(x(a.offset_ms), attempts[i - 1].mx + MARK_GAP) : x(a.offset_ms);
    });
    for (let i = attempts.length - 1; i >= 0; i--) {
      const limit = i === attempts.length - 1 ? W - 8 : attempts[i + 1].mx - MARK_GAP;
      attempts[i].mx = Math.max(8, Math.min(attempts[i].mx, limit));
    }
    // A label above each mark, on the first row where it is clear of the one before (a gap
    // of 4 px), as many rows as that takes up to LABEL_ROWS; past that none (the mark's
    // tooltip says it all anyway).
    const taken = []; // each label row's last label's right end
    for (const a of attempts) {
      const found = numbers.get(a.id);
      a.label = `${a.fault ? "fault" : outcome(a)}${found ? ` ⚑${found.join(",")}` : ""}`;
      const half = textWidth(a.label, 11) / 2;
      a.labelX = Math.max(half, Math.min(W - half, a.mx));
      a.labelRow = taken.findIndex((end) => a.labelX - half > end + 4);
      if (a.labelRow < 0 && taken.length < LABEL_ROWS) a.labelRow = taken.push(-Infinity) - 1;
      if (a.labelRow >= 0) taken[a.labelRow] = a.labelX + half;
    }
    const lane = 12 + 14 * Math.max(2, taken.length);
    const labelY = (row) => lane - 12 - row * 14;
    // Each wait on the first row where it is clear of the waits before it (a gap of 4 px).
    const rowEnds = [];
    for (const a of attempts) {
      if (a.earliest === undefined) continue;
      const x0 = x(a.waitFrom), x1 = Math.max(x(a.earliest), x0 + 1);
      let row = rowEnds.findIndex((end) => x0 >= end + 4);
      if (row < 0) row = rowEnds.push(-Infinity) - 1;
      rowEnds[row] = x1;
      a.waitRow = row;
    }
    const waitY = (row) => lane + 16 + row * 12;
    const axis = rowEnds.length ? waitY(rowEnds.length - 1) + 14 : lane + 14, H = axis + 22;
    const g = sv("svg", {
      viewBox: `0 0 ${W} ${H}`, class: "chain-plot", role: "img",
      "aria-label": `${chain.endpoint}: ${attempts.length} attempts`,
    });
    // Axis and ticks.
    const tick = step(span);
    g.append(sv("line", { x1: left, x2: W - right, y1: lane, y2: lane, class: "lane" }),
      sv("line", { x1: left, x2: W - right, y1: axis, y2: axis, class: "axis" }));
    for (let t = 0; t <= span; t += tick) {
      g.append(sv("line", { x1: x(t), x2: x(t), y1: axis, y2: axis + 4, class: "tick" }),
        sv("text", { x: x(t), y: axis + 16, class: "tick-label" }, ms(t)));
    }
    // The waits the protocol asks for: from the previous answer's end to the earliest retry.
    for (const a of attempts) {
      if (a.earliest === undefined) continue;
      const y = waitY(a.waitRow);
      const x0 = x(a.waitFrom), x1 = x(a.earliest);
      const title = `attempt ${a.n} should wait at least ${ms(a.expected_wait_ms)}`
        + ` after attempt ${a.n - 1} ended: not before +${ms(a.earliest)}`;
      g.append(sv("rect", {
        x: x0, y: y - 5, width: Math.max(1, x1 - x0), height: 10, class: "wait", "data-for": a.id,
      }, sv("title", {}, title)));
      if (numbers.has(a.id) && a.offset_ms < a.earliest) {
        // A retry a finding is about, started inside its wait: how much too soon, in red.
        const short = `attempt ${a.n} came ${ms(a.earliest - a.offset_ms)} too soon`;
        g.append(sv("rect", {
          x: x(a.offset_ms), y: y - 5, width: Math.max(1, x1 - x(a.offset_ms)), height: 10,
          class: "short", "data-for": a.id,
        }, sv("title", {}, short)));
      }
      // The label goes inside its band, or not at all: no two bands of a row overlap, so
      // neither do their labels (the band's tooltip says the same).
      const text = `wait ≥ ${ms(a.expected_wait_ms)}`;
      if (x1 - x0 >= textWidth(text, 10) + 6) {
        g.append(sv("text", { x: x0 + 4, y: y + 3.5, class: "wait-label" }, text));
      }
      g.append(sv("line", {
        x1, x2: x1, y1: lane - 8, y2: y + 5, class: "expected", "data-for": a.id,
      }, sv("title", {}, title)));
    }
    // The attempts: a bar for how long each took, a mark where it started.
    for (const a of attempts) {
      const found = numbers.get(a.id);
      const kind = kindOf(a);
      const cls = `attempt ${kind}${found ? " finding" : ""}`;
      g.append(sv("rect", {
        x: x(a.offset_ms), y: lane - 4, width: Math.max(2, x(a.end) - x(a.offset_ms)), height: 8,
        class: `bar ${kind}`,
      }));
      if (Math.abs(a.mx - x(a.offset_ms)) > 1) {
        g.append(sv("line", {
          x1: x(a.offset_ms), x2: a.mx, y1: lane + 6, y2: lane, class: "nudge", "data-for": a.id,
        }));
      }
      g.append(sv("circle", {
        cx: a.mx, cy: lane, r: found ? 7 : 6, class: cls, "data-id": a.id,
        "data-attempt": a.n,
      }, sv("title", {}, describe(a, found, findings))));
      if (a.labelRow >= 0) {
        g.append(sv("text", {
          x: a.labelX, y: labelY(a.labelRow), class: `mark-label${found ? " finding" : ""}`,
        }, a.label));
      }
    }
    const last = attempts[attempts.length - 1];
    const head = el("div", { class: "chain-head" },
      el("span", { class: "mono" }, chain.endpoint),
      el("span", { class: "muted" },
        ` · chain ${index + 1} · ${plural(attempts.length, "attempt")}`
        + ` · ended ${outcome(last)}${last.error_code ? ` ${last.error_code}` : ""}`));
    return el("div", { class: "chain", "data-endpoint": chain.endpoint }, head, g);
  }

  // -- tasks: a row each, its polls as marks and the statuses they served as bands ----------

  const TERMINAL = ["completed", "failed", "cancelled"];

  /** What a task mark's tooltip says about request *m* of a task submitted at *t0*. */
  function describeMark(m, t0, found, findings) {
    const answer = m.fault || (m.status === null ? "no answer" : String(m.status));
    const lines = [`${m.action} (journal #${m.id}) at +${ms((m.started - t0) * 1000)}: ${answer}`
      + `${m.error_code ? ` ${m.error_code}` : ""}, took ${ms((m.finished - m.started) * 1000)}`];
    if (m.served) lines.push(`served ${m.served}${m.cancelling ? " (cancelling)" : ""}`);
    if (m.poll_after_ms !== null && m.poll_after_ms !== undefined) {
      lines.push(`Retry-After ${ms(m.poll_after_ms)}`);
    }
    if (m.expired) lines.push("the task had expired");
    for (const n of found || []) {
      lines.push(`⚑${n} ${findings[n - 1].rule}: ${findings[n - 1].message}`);
    }
    return lines.join("\n");
  }

  function describeDelivery(d, t0, found, findings) {
    const lines = [`callback (journal #${d.id}) at +${ms((d.started - t0) * 1000)}: pushed`
      + ` ${d.pushed}, delivery ${d.delivery} attempt ${d.attempt}`,
    `receiver: ${d.status === null ? "no answer" : d.status}, `
      + `${d.acknowledged ? "acknowledged" : "not acknowledged"}`];
    if (d.forged) lines.push("signed under a wrong key (forged)");
    if (d.fault && d.fault !== "none") lines.push(`fault: ${d.fault}`);
    for (const n of found || []) {
      lines.push(`⚑${n} ${findings[n - 1].rule}: ${findings[n - 1].message}`);
    }
    return lines.join("\n");
  }

  function drawTasks(tasks, findings, numbers) {
    const box = $("tasks");
    if (!tasks.length) {
      box.replaceChildren();
      return;
    }
    box.replaceChildren(el("h3", {}, "Task timeline"),
      ...tasks.map((task) => drawTask(task, findings, numbers)), taskLegend());
  }

  function drawTask(task, findings, numbers) {
    const t0 = task.started;
    const W = 900, left = 14, right = 24;
    const band = 18, lane = 27, callbacks = 50;
    const hasCallbacks = task.deliveries.length > 0;
    const axis = hasCallbacks ? 64 : 46, H = axis + 22;
    const ends = [task.finished, ...task.deliveries.map((d) => d.finished)];
    const span = Math.max(100, (Math.max(...ends) - t0) * 1000) * 1.04;
    const x = (t) => left + (((t - t0) * 1000) / span) * (W - left - right);
    const g = sv("svg", {
      viewBox: `0 0 ${W} ${H}`, class: "task-plot", role: "img",
      "aria-label": `task ${task.id}: ${plural(task.marks.length, "request")}`,
    });
    const tick = step(span);
    g.append(sv("line", { x1: left, x2: W - right, y1: axis, y2: axis, class: "axis" }));
    for (let t = 0; t <= span; t += tick) {
      const tx = left + (t / span) * (W - left - right);
      g.append(sv("line", { x1: tx, x2: tx, y1: axis, y2: axis + 4, class: "tick" }),
        sv("text", { x: tx, y: axis + 16, class: "tick-label" }, ms(t)));
    }
    // The statuses served, as bands: from the answer that first served each to the next.
    task.bands.forEach((b, i) => {
      const x0 = x(b.from);
      const last = i === task.bands.length - 1;
      // The last band runs to the row's end unless the task ended: a live task may go on.
      const x1 = last && !TERMINAL.includes(b.status) ? W - right : Math.max(x(b.until), x0 + 12);
      g.append(sv("rect", {
        x: x0, y: band, width: Math.max(2, x1 - x0), height: 18,
        class: `band s-${b.status}`, "data-status": b.status,
      }, sv("title", {}, `${b.status} from +${ms((b.from - t0) * 1000)}`)));
      if (x1 - x0 >= textWidth(b.status, 10) + 6) {
        g.append(sv("text", { x: x0 + 3, y: band - 3, class: "band-label" }, b.status));
      }
    });
    // The requests: a cancel as a square, the others as dots, where each was sent.
    for (const m of task.marks) {
      const found = numbers.get(m.id);
      const answered = m.served !== null && m.served !== undefined;
      const kind = m.fault || m.status === null ? "fault" : answered ? "ok" : "retryable";
      const cls = `task-mark ${m.action} ${kind}${found ? " finding" : ""}`;
      const title = sv("title", {}, describeMark(m, t0, found, findings));
      const attrs = { class: cls, "data-id": m.id, "data-action": m.action };
      g.append(m.action === "cancel"
        ? sv("rect", { ...attrs, x: x(m.started) - 6, y: lane - 6, width: 12, height: 12 }, title)
        : sv("circle", { ...attrs, cx: x(m.started), cy: lane, r: found ? 6 : 5 }, title));
    }
    // mockskill's callbacks, under the lane: a triangle each, filled when acknowledged.
    for (const d of task.deliveries) {
      const found = numbers.get(d.id);
      const cx = x(d.started);
      const cls = `callback ${d.acknowledged ? "acked" : "unacked"}${d.forged ? " forged" : ""}`
        + `${found ? " finding" : ""}`;
      g.append(sv("path", {
        d: `M ${cx} ${callbacks - 6} L ${cx + 6} ${callbacks + 5} L ${cx - 6} ${callbacks + 5} Z`,
        class: cls, "data-id": d.id, "data-pushed": d.pushed,
      }, sv("title", {}, describeDelivery(d, t0, found, findings))));
    }
    const served = task.bands.length ? task.bands[task.bands.length - 1].status : "not served";
    const flags = task.findings.map((n) => `⚑${n} ${findings[n - 1].rule}`).join(" ");
    const head = el("div", { class: "chain-head" },
      el("span", { class: "mono" }, `task ${task.id}`),
      el("span", { class: "muted" }, ` · ${task.skill || ""} · ${plural(task.marks.length,
        "request")}${hasCallbacks ? ` · ${plural(task.deliveries.length, "callback")}` : ""}`
        + ` · last served ${served}`),
      flags ? el("b", { class: "bad" }, ` ${flags}`) : null);
    return el("div", {
      class: `chain task${task.findings.length ? " finding" : ""}`, "data-task": task.id,
    }, head, g);
  }

  function taskLegend() {
    const item = (shape, text) => el("span", { class: "legend-item" },
      sv("svg", { viewBox: "0 0 24 16", width: 24, height: 16 }, shape), text);
    const band = (status) => item(sv("rect", {
      x: 1, y: 3, width: 22, height: 10, class: `band s-${status}`,
    }), status);
    return el("div", { class: "legend-row task-legend" },
      ...["submitted", "working", "input_required", "cancelling", "completed", "failed",
        "cancelled"].map(band),
      item(sv("circle", { cx: 12, cy: 8, r: 5, class: "task-mark ok" }), "poll (served)"),
      item(sv("rect", { x: 6, y: 2, width: 12, height: 12, class: "task-mark cancel ok" }),
        "cancel"),
      item(sv("path", { d: "M 12 2 L 18 13 L 6 13 Z", class: "callback acked" }),
        "callback acknowledged"),
      item(sv("path", { d: "M 12 2 L 18 13 L 6 13 Z", class: "callback unacked" }),
        "not acknowledged"));
  }

  // -- streams: a bar an attempt, from its head to its end, and where and why it ended ------

  /** What a stream bar's tooltip says about attempt *s*, its request sent at +*at* ms. */
  function describeStream(s, at, found, findings) {
    const lines = [`${s.skill || s.endpoint} attempt ${s.attempt} (journal #${s.id}) at`
      + ` +${ms(at)}: ${s.status === null ? "no answer" : s.status} ${s.format || ""}`,
    `${plural(s.events, "event")} sent${s.last_id !== null ? `, last id ${s.last_id}` : ""},`
      + ` over ${ms(s.duration_ms)}`,
    `ended ${streamEnd(s)}`];
    if (s.fault) lines.push(`scripted: ${s.fault} after event ${s.fault_after}`);
    if (s.stalled_ms) lines.push(`no byte for the last ${ms(s.stalled_ms)}`);
    if (s.idle_bound_ms !== null && s.idle_bound_ms !== undefined) {
      lines.push(`the scenario's idle bound ${ms(s.idle_bound_ms)}, expected duration`
        + ` ${ms(s.expected_ms)}`);
    }
    if (s.asked_from !== null && s.asked_from !== undefined) {
      lines.push(`the request's Last-Event-ID: ${s.asked_from}`);
    }
    if (s.client_left !== null && s.client_left !== undefined) {
      lines.push(`the client left at +${ms((s.client_left - s.started) * 1000 + at)}`);
    }
    if (s.resumed_from !== null && s.resumed_from !== undefined) {
      lines.push(`resumed after Last-Event-ID ${s.resumed_from}`);
    }
    for (const n of found || []) {
      lines.push(`⚑${n} ${findings[n - 1].rule}: ${findings[n - 1].message}`);
    }
    return lines.join("\n");
  }

  /** How stream attempt *s* ended, in words: complete, or the break and the event it came at. */
  function streamEnd(s) {
    if (!s.broke) return s.error_code ? `error event ${s.error_code}` : "complete";
    const why = String(s.ended).replace(/_/g, " "); // client_left: "client left"
    return `${why} after event ${s.events}`;
  }

  function drawStreams(streams, findings, numbers) {
    const box = $("streams");
    if (!streams.length) {
      box.replaceChildren();
      return;
    }
    // One plot on one time axis (from the first attempt's request), a row an attempt: a
    // re-issue is drawn where it came, after the attempt it followed.
    const W = 900, left = 14, right = 24, row = 36;
    const t0 = Math.min(...streams.map((s) => s.started));
    const ends = streams.map((s) => Math.max(s.finished, leftEarly(s)
      ? s.head + s.expected_ms / 1000 : s.finished));
    const span = Math.max(100, ...ends.map((end) => (end - t0) * 1000)) * 1.04;
    const x = (t) => left + (((t - t0) * 1000) / span) * (W - left - right);
    const axis = 8 + row * streams.length, H = axis + 22;
    const g = sv("svg", {
      viewBox: `0 0 ${W} ${H}`, class: "stream-plot", role: "img",
      "aria-label": `${plural(streams.length, "stream attempt")}`,
    });
    const tick = step(span);
    g.append(sv("line", { x1: left, x2: W - right, y1: axis, y2: axis, class: "axis" }));
    for (let t = 0; t <= span; t += tick) {
      const tx = left + (t / span) * (W - left - right);
      g.append(sv("line", { x1: tx, x2: tx, y1: axis, y2: axis + 4, class: "tick" }),
        sv("text", { x: tx, y: axis + 16, class: "tick-label" }, ms(t)));
    }
    streams.forEach((s, i) => {
      const found = numbers.get(s.id);
      const top = 8 + row * i, y = top + 16;
      const x0 = x(s.head), x1 = Math.max(x(s.finished), x0 + 2);
      const kind = s.broke ? "broke" : "complete";
      const title = () => sv("title", {}, describeStream(s, (s.started - t0) * 1000, found,
        findings));
      const attrs = { "data-id": s.id, "data-ended": s.ended, "data-events": s.events };
      const flags = found ? ` ⚑${found.join(",")}` : "";
      const resumed = s.resumed_from !== null && s.resumed_from !== undefined
        ? ` · resumed after id ${s.resumed_from}` : "";
      const label = `${s.skill || s.endpoint} #${s.attempt}${resumed}`
        + ` · ${plural(s.events, "event")}`
        + `${s.last_id !== null ? ` · last id ${s.last_id}` : ""} · ${streamEnd(s)}${flags}`;
      const labelX = Math.min(x0, W - right - textWidth(label, 10.5));
      g.append(sv("text", {
        x: Math.max(left, labelX), y: top + 7, class: `stream-label${found ? " finding" : ""}`,
      }, label));
      // The wait for the head (the request sent, no byte yet), then the stream itself.
      if (x0 - x(s.started) >= 1) {
        g.append(sv("line", { x1: x(s.started), x2: x0, y1: y, y2: y, class: "stream-wait" }));
      }
      g.append(sv("rect", {
        ...attrs, x: x0, y: y - 5, width: x1 - x0, height: 10,
        class: `stream-bar ${kind}${found ? " finding" : ""}`,
      }, title()));
      // Its last stretch without a byte (a stall, or a pause the client left in), and where
      // the scenario's idle bound ran out in it: where a consumer should have given up.
      const stalledFrom = s.stalled_ms ? Math.max(x0, x(s.finished - s.stalled_ms / 1000)) : x1;
      if (x1 - stalledFrom >= 1) {
        g.append(sv("rect", {
          x: stalledFrom, y: y - 5, width: x1 - stalledFrom, height: 10, class: "stream-stalled",
          "data-for": s.id,
        }, sv("title", {}, `no byte for ${ms(s.stalled_ms)}`)));
        if (s.idle_bound_ms && s.stalled_ms > s.idle_bound_ms) {
          const xi = x(s.finished - (s.stalled_ms - s.idle_bound_ms) / 1000);
          g.append(sv("line", {
            x1: xi, x2: xi, y1: y - 7, y2: y + 7, class: "stream-idle-bound", "data-for": s.id,
          }, sv("title", {}, `the idle bound (${ms(s.idle_bound_ms)} without a byte) ran out`
            + ` here: a consumer should have given up`)));
        }
      }
      // A client that left: how long the scenario said the stream would run.
      if (leftEarly(s)) {
        const xe = x(s.head + s.expected_ms / 1000);
        g.append(sv("line", {
          x1: xe, x2: xe, y1: y - 7, y2: y + 7, class: "stream-expected", "data-for": s.id,
        }, sv("title", {}, `expected to run ${ms(s.expected_ms)}: the client left before`)));
      }
      // Its end: a cap where it completed (an error event's in red); where it broke, a cross.
      g.append(s.broke
        ? sv("path", {
          ...attrs, d: `M ${x1 - 5} ${y - 8} L ${x1 + 5} ${y + 8} M ${x1 + 5} ${y - 8}`
            + ` L ${x1 - 5} ${y + 8}`, class: `stream-break e-${s.ended}`,
        }, title())
        : sv("line", {
          ...attrs, x1, x2: x1, y1: y - 8, y2: y + 8,
          class: `stream-end${s.error_code ? " error" : ""}`,
        }, title()));
    });
    const broke = streams.filter((s) => s.broke).length;
    const head = el("div", { class: "chain-head" },
      el("span", { class: "muted" }, `${plural(streams.length, "stream attempt")}`
        + ` · ${broke} broke · the count of events each sent (the journal keeps no event's`
        + " time)"));
    box.replaceChildren(el("h3", {}, "Stream timeline"),
      el("div", { class: "chain streams" }, head, g), streamLegend());
  }

  /** Whether the client left stream attempt *s* before the scenario's expected duration. */
  function leftEarly(s) {
    return s.ended === "client_left" && s.expected_ms > (s.duration_ms || 0);
  }

  function streamLegend() {
    const item = (shape, text) => el("span", { class: "legend-item" },
      sv("svg", { viewBox: "0 0 24 16", width: 24, height: 16 }, shape), text);
    return el("div", { class: "legend-row stream-legend" },
      item(sv("line", { x1: 1, x2: 23, y1: 8, y2: 8, class: "stream-wait" }), "until the head"),
      item(sv("rect", { x: 1, y: 3, width: 18, height: 10, class: "stream-bar complete" }),
        "streamed, complete"),
      item(sv("rect", { x: 1, y: 3, width: 18, height: 10, class: "stream-bar broke" }),
        "streamed, then broke"),
      item(sv("line", { x1: 12, x2: 12, y1: 0, y2: 16, class: "stream-end error" }),
        "ended with an error event"),
      item(sv("path", { d: "M 7 0 L 17 16 M 17 0 L 7 16", class: "stream-break" }),
        "where it broke (reset, close, stall, client left, ...)"),
      item(sv("rect", { x: 1, y: 3, width: 22, height: 10, class: "stream-stalled" }),
        "no byte"),
      item(sv("line", { x1: 12, x2: 12, y1: 0, y2: 16, class: "stream-idle-bound" }),
        "idle bound ran out"),
      item(sv("line", { x1: 12, x2: 12, y1: 0, y2: 16, class: "stream-expected" }),
        "expected end"),
      item(sv("rect", { x: 1, y: 3, width: 22, height: 10, class: "stream-bar complete finding" }),
        "finding"));
  }

  function legend() {
    const item = (shape, text) => el("span", { class: "legend-item" },
      sv("svg", { viewBox: "0 0 24 16", width: 24, height: 16 }, shape), text);
    return el("div", { class: "legend-row" },
      item(sv("circle", { cx: 12, cy: 8, r: 5, class: "attempt ok" }), "success"),
      item(sv("circle", { cx: 12, cy: 8, r: 5, class: "attempt retryable" }), "retryable error"),
      item(sv("circle", { cx: 12, cy: 8, r: 5, class: "attempt fatal" }), "error not to retry"),
      item(sv("circle", { cx: 12, cy: 8, r: 5, class: "attempt fault" }),
        "transport fault / no answer"),
      item(sv("circle", { cx: 12, cy: 8, r: 6, class: "attempt finding" }), "finding"),
      item(sv("rect", { x: 1, y: 3, width: 22, height: 10, class: "wait" }),
        "backoff the protocol asks for"),
      item(sv("line", { x1: 12, x2: 12, y1: 0, y2: 16, class: "expected" }), "earliest retry"),
      item(sv("rect", { x: 1, y: 3, width: 22, height: 10, class: "short" }), "too soon by"));
  }

  function drawCoverage(coverage) {
    const box = $("coverage");
    if (!coverage) {
      box.replaceChildren();
      return;
    }
    const chips = (counts, order) => el("div", { class: "chips" }, ...order.map((name) => {
      const count = counts[name] || 0;
      return el("span", { class: `chip ${count ? "seen" : "missing"}`, "data-name": name },
        name, el("b", {}, count));
    }));
    const categories = coverage.categories || {};
    const others = Object.keys(categories).filter((c) => !CATEGORIES.includes(c));
    const order = [...CATEGORIES, ...others];
    const faults = coverage.faults || {};
    // Rate-limit answers: a row of their own, outside the chapter (so not in "complete").
    const limited = Object.fromEntries(Object.entries(coverage.rate_limited || {})
      .map(([code, count]) => [`${code === "RATE_LIMITED" ? 429 : 503} ${code}`, count]));
    // Tasks seen to end unsuccessfully: failed by their error's category, and cancelled.
    const tasks = coverage.tasks || {};
    const ended = Object.fromEntries([
      ...Object.entries(tasks.failed || {}).map(([code, count]) => [`failed ${code}`, count]),
      ["cancelled", tasks.cancelled || 0]]);
    // Callback faults served, each task once (outside the chapter too).
    const callbacks = Object.fromEntries(Object.entries(tasks.callbacks || {})
      .map(([fault, count]) => [`callback ${fault}`, count]));
    box.replaceChildren(
      el("h3", {}, "Coverage ", coverage.complete
        ? el("span", { class: "badge good" }, "complete")
        : el("span", { class: "badge warn" }, "incomplete")),
      el("p", { class: "muted" }, "Error categories this session has been answered with:"),
      chips(categories, order),
      el("p", { class: "muted" }, "Transport faults it has met:"),
      chips(faults, Object.keys(faults).sort()),
      ...(Object.values(limited).some((count) => count) ? [
        el("p", { class: "muted" }, "Rate-limit answers (outside the chapter: not asked for"
          + " by \u201ccomplete\u201d):"),
        chips(limited, Object.keys(limited))] : []),
      ...(Object.values(ended).some((count) => count) ? [
        el("p", { class: "muted" }, "Tasks that ended unsuccessfully (outside the chapter):"),
        chips(ended, Object.keys(ended))] : []),
      ...(Object.values(callbacks).some((count) => count) ? [
        el("p", { class: "muted" }, "Callback faults served (outside the chapter):"),
        chips(callbacks, Object.keys(callbacks))] : []));
  }

  // -- start ----------------------------------------------------------------------------------

  const wanted = new URLSearchParams(location.hash.slice(1)).get("session");
  if (wanted) select(wanted);
  if (sessionStorage.getItem(TOKEN_KEY)) $("forget-token").hidden = false;
  poll();
})();
