/// <reference types="mockskill/vitest" />
import { MockskillClient, mockskillMatchers } from "mockskill";
import { expect, test } from "vitest"; // Jest: from "@jest/globals", and mockskill/jest above

expect.extend(mockskillMatchers);
const admin = new MockskillClient(process.env["MOCKSKILL_URL"] ?? "http://localhost:8080");
const call = (headers: Record<string, string>) =>
  fetch(`${admin.baseUrl}/skills/auth-required/invoke`, { method: "POST", headers, body: "{}" });

test("asking once is clean; retrying what cannot succeed is not", async () => {
  const once = admin.session(`once-${Date.now()}`);
  const twice = admin.session(`twice-${Date.now()}`);
  await call(once.headers);
  await call(twice.headers);
  await call(twice.headers);
  await expect(once).toBeClean();                                   // the verdict: 200
  await expect(once).toBeClean({ require: ["AUTH_REQUIRED"] });      // and covered
  await expect(once).toHaveVerified({ skill: "auth-required", count: 1 });
  await expect(twice).not.toBeClean();       // else: each finding, its fix, in the message
});
