/**
 * The matchers, registered with Jest's own `expect` (the `expect` package: what Jest's
 * global is; Vitest's `expect.extend` takes the same matcher objects) and run against a
 * real `mockskill serve`.
 */
import assert from "node:assert/strict";
import { after, before, describe, test } from "node:test";

import { expect } from "expect";
import { type MockskillMatchers, MockskillClient, MockskillError, mockskillMatchers } from "mockskill";

import { scenario, hastyInvoke, politeInvoke } from "./consumer.js";
import { type Served, serve, sessionName } from "./server.js";

declare module "expect" {
  interface Matchers<R extends void | Promise<void>> extends MockskillMatchers<R> {}
}

expect.extend(mockskillMatchers);

const skills = scenario("ts-matchers");
let server: Served;
let admin: MockskillClient;

before(async () => {
  server = await serve();
  admin = new MockskillClient(server.url);
  await admin.loadScenarios(skills.text);
});
after(() => server.stop());

describe("toBeClean", () => {
  test("passes for a consumer that retries as asked, with the coverage it requires", async () => {
    const session = admin.session(sessionName("clean"));
    await politeInvoke(server.url, session, skills.quote, {});
    await expect(session).toBeClean();
    await expect(session).toBeClean({ require: ["ENDPOINT_UNREACHABLE"] });
  });

  test("fails for one that does not, listing each finding and its fix", async () => {
    const session = admin.session(sessionName("dirty"));
    await hastyInvoke(server.url, session, skills.locked, 2);
    await expect(session).not.toBeClean();
    await assert.rejects(expect(session).toBeClean(), (error: Error) => {
      assert.match(error.message, new RegExp(`expected session '${session.name}' to be clean`));
      assert.match(error.message, /non-retryable-retried: .*\n {4}fix: /);
      return true;
    });
  });

  test("fails for coverage not met, naming what is not covered", async () => {
    const session = admin.session(sessionName("uncovered"));
    await politeInvoke(server.url, session, skills.quote, {});
    await assert.rejects(expect(session).toBeClean({ require: ["AUTH_REQUIRED"] }), /not covered: AUTH_REQUIRED/);
  });

  test("fails for a session that made no request, never passes it", async () => {
    const session = admin.session(sessionName("silent"));
    await assert.rejects(expect(session).toBeClean(), /No such session|no request|never/i);
  });

  test("refuses what is not a session, saying what to pass", async () => {
    await assert.rejects(expect("ci-42").toBeClean(), (error: unknown) => {
      assert.ok(error instanceof MockskillError);
      assert.equal(error.code, "NOT_A_SESSION");
      assert.match(error.message, /client\.session\("ci-42"\)/);
      return true;
    });
  });
});

describe("toHaveVerified", () => {
  test("passes when the session sent the requests named, as many as said", async () => {
    const session = admin.session(sessionName("sent"));
    await politeInvoke(server.url, session, skills.quote, { item: "pen" });
    await expect(session).toHaveVerified({ skill: skills.quote, count: 3 });
    await expect(session).toHaveVerified({ skill: skills.quote, when: { body: { "/item": "pen" } } });
    await expect(session).not.toHaveVerified({ skill: skills.locked });
  });

  test("fails with the server's words: what was wanted, what was found, the near misses", async () => {
    const session = admin.session(sessionName("unsent"));
    await politeInvoke(server.url, session, skills.quote, { item: "pen" });
    await assert.rejects(
      expect(session).toHaveVerified({ skill: skills.quote, when: { body: { "/item": "ink" } } }),
      /verify did not hold: .*found 0[\s\S]*closest requests/,
    );
    await assert.rejects(expect(session).not.toHaveVerified({ skill: skills.quote }), /not to have sent/);
  });
});
