/// <reference types="mockskill/jest" />
/// <reference types="jest" />
/**
 * The matchers on Jest's global `expect`, typed by `@types/jest` (its `jest.Matchers`), as
 * a project that imports nothing from Jest writes them. The rest is in matchers.test.ts.
 */
import { MockskillClient, mockskillMatchers } from "mockskill";

import { hastyInvoke, politeInvoke, scenario } from "../../consumer.js";

expect.extend(mockskillMatchers);

const skills = scenario("jest-globals");
const admin = new MockskillClient(process.env["MOCKSKILL_URL"] ?? "MOCKSKILL_URL is unset");

test("the global expect has both matchers, and .not", async () => {
  await admin.loadScenarios(skills.text);
  const polite = admin.session(`jest-globals-clean-${process.pid}-${Date.now()}`);
  const hasty = admin.session(`jest-globals-dirty-${process.pid}-${Date.now()}`);
  await politeInvoke(admin.baseUrl, polite, skills.quote, {});
  await hastyInvoke(admin.baseUrl, hasty, skills.locked, 2);
  await expect(polite).toBeClean({ require: ["ENDPOINT_UNREACHABLE"] });
  await expect(polite).toHaveVerified({ skill: skills.quote, count: 3 });
  await expect(hasty).not.toBeClean();
  await expect(expect(hasty).toBeClean()).rejects.toThrow(/non-retryable-retried: .*\n {4}fix: /);
});
