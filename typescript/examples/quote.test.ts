import assert from "node:assert/strict";
import { test } from "node:test";
import { MockskillClient } from "mockskill";

const admin = new MockskillClient(process.env["MOCKSKILL_URL"] ?? "http://localhost:8080");
const scenario = `
name: readme-quote
skills:
  - id: quote
    invoke:
      - {error: ENDPOINT_UNREACHABLE, retry: {suggested_delay_ms: 50, max_attempts: 4}, times: 2}
      - {json: {price: 42}}
`;

// The consumer under test: here, a fetch loop that waits as each error advises.
async function quote(headers: Record<string, string>, attempt = 0): Promise<unknown> {
  const reply = await fetch(`${admin.baseUrl}/skills/quote/invoke`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Skill-Protocol-Version": "1.0.0", ...headers },
    body: JSON.stringify({ item: "book" }),
  });
  if (reply.ok) return reply.json();
  const { error } = (await reply.json()) as { error: { retry: { suggested_delay_ms: number } } };
  await new Promise((wake) => setTimeout(wake, error.retry.suggested_delay_ms * 2 ** attempt));
  return quote(headers, attempt + 1);
}

test("the consumer gets its quote through two outages, and retries as the protocol asks", async () => {
  await admin.loadScenarios(scenario, { replace: true });
  const session = admin.session(`readme-${Date.now()}`);
  assert.deepEqual(await quote(session.headers), { price: 42 });
  await session.verdict({ require: ["ENDPOINT_UNREACHABLE"] }); // else a VerdictError: each finding, its fix
});
