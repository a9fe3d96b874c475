/// <reference types="mockskill/vitest" />
/**
 * The matchers under the real Vitest, as a user writes them: `expect.extend`, the
 * package's types for `Assertion`, and a real `mockskill serve` (MOCKSKILL_URL, started
 * by tests/test_typescript_package.py).
 */
import { MockskillClient, mockskillMatchers } from "mockskill";
import { beforeAll, describe, expect, test } from "vitest";

import { hastyInvoke, politeInvoke, scenario } from "../../consumer.js";

expect.extend(mockskillMatchers);

const skills = scenario("vitest-matchers");
const admin = new MockskillClient(process.env["MOCKSKILL_URL"] ?? "MOCKSKILL_URL is unset");
const session = (label: string) => admin.session(`vitest-${label}-${process.pid}-${Date.now()}`);

beforeAll(async () => {
  await admin.loadScenarios(skills.text);
});

describe("toBeClean", () => {
  test("passes for a consumer that retries as asked, covered as required", async () => {
    const polite = session("clean");
    await politeInvoke(admin.baseUrl, polite, skills.quote, {});
    await expect(polite).toBeClean();
    await expect(polite).toBeClean({ require: ["ENDPOINT_UNREACHABLE"] });
    await expect(expect(polite).not.toBeClean()).rejects.toThrow(/not to be clean, but it is: 3 requests/);
  });

  test("fails for one that does not, in the server's words: each finding and its fix", async () => {
    const hasty = session("dirty");
    await hastyInvoke(admin.baseUrl, hasty, skills.locked, 2);
    await expect(hasty).not.toBeClean();
    await expect(expect(hasty).toBeClean()).rejects.toThrow(
      new RegExp(`expected session '${hasty.name}' to be clean: .*\\n  non-retryable-retried: .*\\n {4}fix: `),
    );
  });

  test("fails for coverage not met, and for a session that made no request", async () => {
    const polite = session("uncovered");
    await politeInvoke(admin.baseUrl, polite, skills.quote, {});
    await expect(expect(polite).toBeClean({ require: ["AUTH_REQUIRED"] })).rejects.toThrow(/not covered: AUTH_REQUIRED/);
    await expect(expect(session("silent")).toBeClean()).rejects.toThrow(/no such session|no request|never/i);
  });

  test("refuses what is not a session, saying what to pass", async () => {
    await expect(expect("ci-42").toBeClean()).rejects.toThrow(
      expect.objectContaining({ code: "NOT_A_SESSION", message: expect.stringMatching(/client\.session\("ci-42"\)/) }),
    );
  });
});

describe("toHaveVerified", () => {
  test("passes for the requests sent, and .not for those never sent", async () => {
    const polite = session("sent");
    await politeInvoke(admin.baseUrl, polite, skills.quote, { item: "pen" });
    await expect(polite).toHaveVerified({ skill: skills.quote, count: 3 });
    await expect(polite).toHaveVerified({ skill: skills.quote, when: { body: { "/item": "pen" } } });
    await expect(polite).not.toHaveVerified({ skill: skills.locked });
  });

  test("fails with the server's words: what was wanted, what was found, the near misses", async () => {
    const polite = session("unsent");
    await politeInvoke(admin.baseUrl, polite, skills.quote, { item: "pen" });
    await expect(
      expect(polite).toHaveVerified({ skill: skills.quote, when: { body: { "/item": "ink" } } }),
    ).rejects.toThrow(/verify did not hold: .*found 0[\s\S]*closest requests/);
    await expect(expect(polite).not.toHaveVerified({ skill: skills.quote })).rejects.toThrow(/not to have sent/);
  });
});
