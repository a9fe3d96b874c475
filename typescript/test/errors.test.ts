/**
 * Bad input: every error body mockskill answers becomes a typed error carrying its status,
 * code and message — the unified `{"error": ...}` body and RFC 9457 problem+json alike —
 * and an answer that is neither, or none at all, says so.
 */
import assert from "node:assert/strict";
import { createServer } from "node:http";
import type { AddressInfo } from "node:net";
import { after, before, describe, test } from "node:test";

import {
  AdminAuthError,
  InvalidInputError,
  MockskillClient,
  MockskillError,
  ProblemError,
  UnknownSessionError,
  UnreachableError,
  errorFromResponse,
} from "mockskill";

import { scenario, politeInvoke } from "./consumer.js";
import { type Served, serve, sessionName } from "./server.js";

const skills = scenario("ts-errors");
let server: Served;
let admin: MockskillClient;

before(async () => {
  server = await serve();
  admin = new MockskillClient(server.url);
  await admin.loadScenarios(skills.text);
});
after(() => server.stop());

/** Asserts *promise* rejects with an instance of *kind* of this status and code; the error. */
async function rejection<T extends MockskillError>(
  promise: Promise<unknown>,
  kind: abstract new (...args: never[]) => T,
  status: number,
  code: string,
): Promise<T> {
  try {
    await promise;
  } catch (error) {
    assert.ok(error instanceof kind, `expected a ${kind.name}, got ${String(error)}`);
    assert.equal(error.status, status);
    assert.equal(error.code, code);
    assert.ok(error.message.length > 0);
    return error;
  }
  assert.fail(`expected a ${kind.name} (${status} ${code}), but it resolved`);
}

describe("the unified error body", () => {
  test("a filter the journal does not take: 400 naming the parameter", async () => {
    const error = await rejection(admin.journal({ limit: -1 }), MockskillError, 400, "MOCKSKILL_BAD_REQUEST");
    assert.equal(error.details["parameter"], "limit");
    assert.match(error.message, /limit/);
  });

  test("a scenario that is not loaded: 404 with the loaded names", async () => {
    const error = await rejection(admin.removeScenario("ts-errrors"), MockskillError, 404, "MOCKSKILL_SCENARIO_NOT_FOUND");
    assert.equal((error.details["did_you_mean"] as string[])[0], "ts-errors");
  });

  test("a scenario loaded twice: 409", async () => {
    await rejection(admin.loadScenarios(skills.text), MockskillError, 409, "MOCKSKILL_SCENARIO_CONFLICT");
  });

  test("a bad scenario: 422, every problem positioned", async () => {
    const error = await rejection(
      admin.loadScenarios("name: ts-bad\nskills:\n  - id: 3\n    bogus: 1\n", { file: "bad.yaml" }),
      InvalidInputError,
      422,
      "MOCKSKILL_INVALID_SCENARIO",
    );
    assert.deepEqual(
      error.problems.map((p) => [p.file, p.line, p.column, p.path]),
      [
        ["bad.yaml", 3, 9, "skills[0].id"],
        ["bad.yaml", 4, 5, "skills[0].bogus"],
      ],
    );
    assert.equal(error.problems[1]?.found, "unknown key 'bogus'");
  });

  test("a verify claim it cannot read: 422, positioned in the claim", async () => {
    const claim = { skill: skills.quote, count: { equals: 1, at_least: 2 } };
    const error = await rejection(admin.verify(claim), InvalidInputError, 422, "MOCKSKILL_INVALID_VERIFICATION");
    assert.ok(error.problems.length > 0);
    assert.ok(error.problems.every((p) => p.file === "<verify request>"));
  });

  test("a request without the admin token, or with a wrong one: an AdminAuthError", async () => {
    const guarded = await serve("--admin-token", "s3cret");
    try {
      await rejection(new MockskillClient(guarded.url).health(), AdminAuthError, 401, "MOCKSKILL_ADMIN_TOKEN_REQUIRED");
      const wrong = new MockskillClient(guarded.url, { adminToken: "guess" });
      await rejection(wrong.health(), AdminAuthError, 401, "MOCKSKILL_ADMIN_TOKEN_REQUIRED");
      const right = new MockskillClient(guarded.url, { adminToken: "s3cret" });
      assert.equal((await right.health()).status, "ok");
    } finally {
      await guarded.stop();
    }
  });

  test("a skill's own error body reads the same way, with its category as the code", async () => {
    const reply = await fetch(`${server.url}/skills/${skills.locked}/invoke`, { method: "POST", body: "{}" });
    const error = errorFromResponse(reply.status, reply.headers.get("content-type") ?? "", await reply.text());
    assert.ok(!(error instanceof AdminAuthError), "a skill's AUTH_REQUIRED is not the admin token");
    assert.equal(error.status, 401);
    assert.equal(error.code, "AUTH_REQUIRED");
  });
});

describe("problem+json (the verdict)", () => {
  test("a mistyped session: 404 with the close names, never a pass", async () => {
    const session = admin.session(sessionName("typo"));
    await politeInvoke(server.url, session, skills.quote, {});
    // One letter changed, never to itself: the name's random tail can already end in "x".
    const typo = `${session.name.slice(0, -1)}${session.name.endsWith("x") ? "y" : "x"}`;
    const error = await rejection(admin.verdict(typo), UnknownSessionError, 404, "unknown-session");
    assert.equal(error.didYouMean[0], session.name, "the closest name first (a shared server has others)");
    assert.equal(error.type, "https://mockskill.dev/problems/unknown-session");
    assert.match(error.message, new RegExp(session.name));
  });

  test("a require= name no gate knows: 400 naming the valid ones", async () => {
    const error = await rejection(admin.verdict("anyone", { require: ["ENDPOINT_UNREACHALBE"] }), ProblemError, 400, "bad-query");
    assert.equal(error.details["parameter"], "require");
    assert.match(error.message, /did you mean 'ENDPOINT_UNREACHABLE'/);
  });

  test("an empty session name: 400 naming the parameter, never everyone's verdict", async () => {
    const error = await rejection(admin.verdict(""), ProblemError, 400, "bad-query");
    assert.equal(error.details["parameter"], "session");
  });

  test("an empty session name to reset is refused before it is sent: resetAll() says everyone", async () => {
    await assert.rejects(admin.reset(""), /reset\(\) needs a session name; resetAll\(\) forgets everyone's/);
  });

  test("a problem without a type reads as about:blank, RFC 9457's default", () => {
    const body = JSON.stringify({ title: "Teapot", status: 418, detail: "short and stout" });
    const error = errorFromResponse(418, "application/problem+json", body);
    assert.ok(error instanceof ProblemError);
    assert.deepEqual([error.status, error.code, error.message], [418, "about:blank", "short and stout"]);
  });
});

describe("answers that are no mockskill error", () => {
  let proxy: ReturnType<typeof createServer>;
  let proxyUrl: string;

  before(async () => {
    // What sits in front of a server at times: a proxy's HTML page, a 200 that is not JSON.
    proxy = createServer((request, response) => {
      if (request.url === "/__admin/health") {
        response.writeHead(200, { "Content-Type": "text/plain" }).end("ok");
      } else {
        response.writeHead(502, { "Content-Type": "text/html" }).end("<h1>Bad Gateway</h1>");
      }
    });
    await new Promise<void>((resolve) => proxy.listen(0, "127.0.0.1", resolve));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as AddressInfo).port}`;
  });
  after(() => new Promise<void>((resolve) => proxy.close(() => resolve())));

  test("an error page: UNEXPECTED_RESPONSE with the status and the page", async () => {
    const error = await rejection(new MockskillClient(proxyUrl).journal(), MockskillError, 502, "UNEXPECTED_RESPONSE");
    assert.match(error.message, /502 .*text\/html.*Bad Gateway/);
  });

  test("a success that is not JSON: UNEXPECTED_RESPONSE", async () => {
    await rejection(new MockskillClient(proxyUrl).health(), MockskillError, 200, "UNEXPECTED_RESPONSE");
  });

  test("no answer at all: an UnreachableError naming the request", async () => {
    const closed = new MockskillClient("http://127.0.0.1:9");
    const error = await rejection(closed.health(), UnreachableError, 0, "UNREACHABLE");
    assert.match(error.message, /GET http:\/\/127.0.0.1:9\/__admin\/health: no answer/);
  });
});
