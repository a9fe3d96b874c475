/** The admin client against a real `mockskill serve`: each route it wraps, as a test would use it. */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { MockskillClient, UnreachableError, VerdictError, VerificationError } from "mockskill";

import { scenario, hastyInvoke, politeInvoke } from "./consumer.js";
import { type Served, serve, sessionName } from "./server.js";

const skills = scenario("ts-client");
let server: Served;
let admin: MockskillClient;

before(async () => {
  server = await serve();
  admin = new MockskillClient(server.url);
  await admin.loadScenarios(skills.text);
});
after(() => server.stop());

describe("health", () => {
  test("says what is served", async () => {
    const health = await admin.health();
    assert.equal(health.status, "ok");
    assert.ok(health.scenarios.includes("ts-client"));
  });

  test("waitUntilHealthy answers at once from a server that is up", async () => {
    const health = await admin.waitUntilHealthy({ timeoutMs: 2_000 });
    assert.equal(health.status, "ok");
  });

  test("waitUntilHealthy gives up at its deadline when nothing listens", async () => {
    const nobody = new MockskillClient("http://127.0.0.1:9"); // discard: nothing serves it here
    const started = performance.now();
    await assert.rejects(nobody.waitUntilHealthy({ timeoutMs: 300, intervalMs: 20 }), (error: unknown) => {
      assert.ok(error instanceof UnreachableError);
      assert.equal(error.code, "NOT_HEALTHY");
      assert.match(error.message, /was not healthy within 300 ms/);
      return true;
    });
    const took = performance.now() - started;
    assert.ok(took >= 250 && took < 2_000, `gave up after ${took} ms`);
  });
});

describe("scenarios", () => {
  test("load answers the names loaded, and remove unloads", async () => {
    const names = await admin.loadScenarios('{"name": "ts-json", "skills": [{"id": "one"}]}', { format: "json" });
    assert.deepEqual(names, ["ts-json"]);
    assert.ok((await admin.health()).scenarios.includes("ts-json"));
    await admin.removeScenario("ts-json");
    assert.ok(!(await admin.health()).scenarios.includes("ts-json"));
  });

  test("replace takes a loaded scenario's place", async () => {
    await admin.loadScenarios("name: ts-again\nskills: [{id: a}]\n");
    assert.deepEqual(await admin.loadScenarios("name: ts-again\nskills: [{id: b}]\n", { replace: true }), ["ts-again"]);
    await admin.removeScenario("ts-again");
  });
});

describe("a session", () => {
  test("requests and journal read one session's requests, oldest first", async () => {
    const session = admin.session(sessionName("requests"));
    const reply = await politeInvoke(server.url, session, skills.quote, { item: "book" });
    assert.equal(reply.status, 200);
    const sent = await session.requests();
    assert.deepEqual(
      sent.map((r) => r.status),
      [503, 503, 200],
    );
    assert.equal(JSON.parse(sent[0]?.body ?? "null").item, "book");
    assert.equal((await admin.journal({ session: session.name, status: 503 })).length, 2);
  });

  test("reset forgets the session's positions and journal", async () => {
    const session = admin.session(sessionName("reset"));
    await politeInvoke(server.url, session, skills.quote, {});
    await session.reset();
    assert.deepEqual(await session.requests(), []);
    const again = await hastyInvoke(server.url, session, skills.quote, 1);
    assert.equal(again[0]?.status, 503, "the sequence starts afresh");
  });

  test("verify answers what matched, or throws a VerificationError with the near misses", async () => {
    const session = admin.session(sessionName("verify"));
    await politeInvoke(server.url, session, skills.quote, { item: "pen" });
    const held = await session.verify({ skill: skills.quote, when: { body: { "/item": "pen" } }, count: 3 });
    assert.equal(held.held, true);
    assert.equal(held.count, 3);
    await assert.rejects(session.verify({ skill: skills.quote, when: { body: { "/item": "ink" } } }), (error: unknown) => {
      assert.ok(error instanceof VerificationError);
      assert.equal(error.status, 409);
      assert.equal(error.code, "MOCKSKILL_VERIFICATION_FAILED");
      assert.equal(error.count, 0);
      assert.match(error.message, /found 0/);
      return true;
    });
  });

  test("report audits the session", async () => {
    const session = admin.session(sessionName("report"));
    await hastyInvoke(server.url, session, skills.locked, 2);
    const report = await session.report();
    assert.equal(report.sessions.length, 1);
    assert.ok(report.sessions[0]!.findings.length > 0, "retrying AUTH_REQUIRED unchanged is a finding");
  });

  test("the verdict of a consumer that retries as asked is clean", async () => {
    const session = admin.session(sessionName("clean"));
    await politeInvoke(server.url, session, skills.quote, {});
    const verdict = await session.verdict({ require: ["ENDPOINT_UNREACHABLE"] });
    assert.equal(verdict.clean, true);
    assert.equal(verdict.requests, 3);
    assert.deepEqual(verdict.required, ["ENDPOINT_UNREACHABLE"]);
  });

  test("the verdict of a consumer that does not is a VerdictError with its findings", async () => {
    const session = admin.session(sessionName("dirty"));
    await hastyInvoke(server.url, session, skills.locked, 2);
    await assert.rejects(session.verdict({ require: ["ENDPOINT_UNREACHABLE"] }), (error: unknown) => {
      assert.ok(error instanceof VerdictError, String(error));
      assert.equal(error.status, 409);
      assert.equal(error.code, "not-clean");
      assert.equal(error.type, "https://mockskill.dev/problems/not-clean");
      assert.equal(error.session, session.name);
      assert.ok(error.findings.length > 0);
      assert.ok(error.findings.every((f) => typeof f.rule === "string"));
      assert.deepEqual(error.uncovered, ["ENDPOINT_UNREACHABLE"]);
      return true;
    });
  });
});
