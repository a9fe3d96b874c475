/** README.md's example is examples/quote.test.ts as it is, and it passes against a real server. */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { readFile } from "node:fs/promises";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";
import { test } from "node:test";

import { serve } from "./server.js";

const PACKAGE = fileURLToPath(new URL("../..", import.meta.url)); // dist/test/ → typescript/

test("the README shows the example as it is", async () => {
  const readme = await readFile(`${PACKAGE}README.md`, "utf8");
  const example = await readFile(`${PACKAGE}examples/quote.test.ts`, "utf8");
  const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1]);
  assert.ok(blocks.includes(example), "README.md's first ts block differs from examples/quote.test.ts");
});

test("the README shows the matchers' example as it is (test/runners/ runs it under Vitest)", async () => {
  const readme = await readFile(`${PACKAGE}README.md`, "utf8");
  const example = await readFile(`${PACKAGE}test/runners/vitest/readme.test.ts`, "utf8");
  const blocks = [...readme.matchAll(/^```ts\n([\s\S]*?)^```/gm)].map((m) => m[1]);
  assert.ok(blocks.includes(example), "README.md's matchers block differs from test/runners/vitest/readme.test.ts");
});

test("the example passes against a real mockskill serve", async () => {
  const server = await serve();
  // A run of its own, as a user's: not a child of this run's test runner.
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  try {
    const run = await promisify(execFile)(process.execPath, ["--test", "--test-reporter=tap", `${PACKAGE}dist/examples/quote.test.js`], {
      env: { ...env, MOCKSKILL_URL: server.url },
      timeout: 30_000,
    });
    assert.match(run.stdout, /^# pass 1$/m);
    assert.match(run.stdout, /^# fail 0$/m);
  } finally {
    await server.stop();
  }
});
