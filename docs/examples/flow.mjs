// A consumer's integration test driven over HTTP only (Node.js 18+, no packages).
//
//   node flow.mjs [BASE_URL]
//
// 1. load a scenario into a running mockskill, 2. run the consumer under test
// against it in a session of its own, 3. check the journal, 4. the retry
// audit, 5. clean up. Exits non-zero, saying why, when anything is off.
import { readFile } from "node:fs/promises";
import assert from "node:assert/strict";

const base = process.argv[2] ?? "http://localhost:8080";
const session = `node-${process.pid}-${Date.now()}`;
const scenario = await readFile(new URL("./quote.yaml", import.meta.url), "utf8");

// 1. Load the scenario; every problem in it would come back at once, as a 422.
let response = await fetch(`${base}/__admin/scenarios`, {
  method: "POST",
  headers: { "Content-Type": "application/yaml" },
  body: scenario,
});
assert.equal(response.status, 201, await response.text());

try {
  // 2. The consumer under test: retries retryable errors with the protocol's
  // backoff (initial × 2^(attempt − 1), never less than the advice given).
  const sleep = (ms) => new Promise((resolve) => setTimeout(resolve, ms));
  async function invoke(skill, input) {
    for (let attempt = 1; ; attempt++) {
      const reply = await fetch(`${base}/skills/${skill}/invoke`, {
        method: "POST",
        headers: {
          "Content-Type": "application/json",
          "Skill-Protocol-Version": "1.0.0",
          "Mockskill-Session": session,
        },
        body: JSON.stringify(input),
      });
      const body = await reply.json();
      if (reply.ok) return body;
      const retry = body.error.retry;
      if (!retry || attempt >= retry.max_attempts) throw new Error(body.error.message);
      await sleep(retry.suggested_delay_ms * 2 ** (attempt - 1));
    }
  }
  const result = await invoke("quote", { item: "book" });
  assert.deepEqual(result, { price: 42, currency: "EUR" });

  // 3. What the server saw: three attempts, two refused, then the answer.
  const journal = await (await fetch(`${base}/__admin/journal?session=${session}`)).json();
  assert.deepEqual(journal.entries.map((e) => e.status), [503, 503, 200]);

  // 4. The verdict: did the consumer retry as the protocol asks?
  const report = await (await fetch(`${base}/__admin/report?session=${session}`)).json();
  const findings = report.sessions.flatMap((s) => s.findings);
  assert.deepEqual(findings, [], findings.map((f) => `${f.rule}: ${f.message}`).join("\n"));
  console.log(`ok: ${journal.entries.length} attempts, statuses ${journal.entries.map((e) => e.status)}`);
} finally {
  // 5. Leave the server as it was.
  await fetch(`${base}/__admin/reset?session=${session}`, { method: "POST" });
  await fetch(`${base}/__admin/scenarios/quote-demo`, { method: "DELETE" });
}
