// A stream consumer as its user writes one with Node's fetch, and one bug (consumer.py's).
//
//     node consumer.mjs BUG SESSION BASE [BASE ...]
//
// fetch has no idle timeout of its own: an AbortController, re-armed on every chunk, is
// one. The gave-up consumer has a total timeout besides, shorter than the slow stream.
import { randomUUID } from "node:crypto";

const [BUG, SESSION, ...BASES] = process.argv.slice(2);
const SKILLS = ["cut", "resumable", "stall", "overload", "denied", "slow"];
const IDLE = BUG === "no-idle-timeout" ? null : 450;
const TOTAL = BUG === "gave-up" ? 250 : null;
const RETRYABLE = new Set(["ENDPOINT_UNREACHABLE", "EXECUTION_TIMEOUT"]);
let turn = 0;
const nextBase = () => BASES[turn++ % BASES.length];
const sleep = (ms) => new Promise((done) => setTimeout(done, ms));

// The events of whole SSE blocks, as EventSource dispatches them (retry: on its own).
function* sseEvents(text) {
  let event = {};
  let data = [];
  for (const line of text.split(/\r\n|\r|\n/)) {
    if (line === "") {
      if (data.length) yield { ...event, data: data.join("\n") };
      event = {};
      data = [];
      continue;
    }
    const colon = line.indexOf(":");
    const name = colon < 0 ? line : line.slice(0, colon);
    const value = colon < 0 ? "" : line.slice(colon + 1).replace(/^ /, "");
    if (name === "data") data.push(value);
    else if (name === "retry") yield { retry: value };
    else if (name === "id" || name === "event") event[name] = value;
  }
}

// One attempt: the events of the blocks that came whole, and why it ended early, if it did.
async function attempt(url, headers) {
  const controller = new AbortController();
  let why = null;
  let idle = null;
  const rearm = () => {
    if (IDLE === null) return;
    clearTimeout(idle);
    idle = setTimeout(() => { why = "broke"; controller.abort(); }, IDLE);
  };
  let total = null;
  let text = "";
  try {
    const answer = await fetch(url, {
      method: "POST",
      headers: { ...headers, "content-type": "application/json" },
      body: JSON.stringify({ q: "hi" }),
      signal: controller.signal,
    });
    if (TOTAL !== null) total = setTimeout(() => { why = "total"; controller.abort(); }, TOTAL);
    rearm();
    const decoder = new TextDecoder();
    for await (const chunk of answer.body) {
      text += decoder.decode(chunk, { stream: true });
      rearm();
    }
  } catch {
    why ??= "broke";
  } finally {
    clearTimeout(idle);
    clearTimeout(total);
  }
  const whole = text.slice(0, text.lastIndexOf("\n\n") + 2);
  return { events: [...sseEvents(whole)], why };
}

async function invoke(skill) {
  const key = randomUUID();
  let lastId = null;
  let retryMs = null;
  for (let n = 1; n <= 3; n++) {
    const headers = { "Mockskill-Session": SESSION, accept: "text/event-stream" };
    if (BUG !== "no-key") headers["Idempotency-Key"] = key;
    if (lastId !== null && BUG !== "no-last-event-id") headers["Last-Event-ID"] = lastId;
    const { events, why } = await attempt(`${nextBase()}/skills/${skill}/invoke`, headers);
    if (why === "total") return `${skill}: gave up (total timeout)`;
    for (const event of events) {
      if (event.retry !== undefined) retryMs = Number(event.retry);
      if (event.id !== undefined) lastId = event.id;
    }
    const last = events.length ? events[events.length - 1] : {};
    if (last.event === "result") return `${skill}: result after ${n} attempts`;
    let waitMs = retryMs ?? 1000; // the chapter's first wait
    if (last.event === "error") {
      const error = JSON.parse(last.data).error;
      if (!RETRYABLE.has(error.code) && BUG !== "retry-nonretryable") {
        return `${skill}: ${error.code}, not retried`;
      }
      waitMs = error.retry?.suggested_delay_ms ?? 200;
    }
    const backoff = 2 ** (n - 1); // the advice is the first wait: double it after each
    await sleep(BUG === "retry-too-soon" ? 0 : waitMs * backoff * 1.25);
  }
  return `${skill}: gave up after 3 attempts`;
}

for (const skill of SKILLS) console.log(await invoke(skill));
