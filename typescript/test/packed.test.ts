/**
 * The package as a user gets it: `npm pack`, installed from the tarball into a project of
 * its own (no testcontainers there: an optional peer), type-checked against the packed
 * declarations with strict tsc, and run against a real `mockskill serve`.
 */
import assert from "node:assert/strict";
import { execFile } from "node:child_process";
import { existsSync } from "node:fs";
import { mkdtemp, readFile, rm, writeFile } from "node:fs/promises";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, test } from "node:test";
import { fileURLToPath } from "node:url";
import { promisify } from "node:util";

import { type Served, serve } from "./server.js";

const PACKAGE = fileURLToPath(new URL("../..", import.meta.url)); // dist/test/ → typescript/
const run = promisify(execFile);
const npm = process.platform === "win32" ? "npm.cmd" : "npm";

const CONSUMER = `import assert from "node:assert/strict";
import { test } from "node:test";
import { MockskillClient, UnknownSessionError, VerdictError, mockskillMatchers } from "mockskill";

const admin = new MockskillClient(process.env["MOCKSKILL_URL"] ?? "");

test("the packed client reads the verdict, and its errors are typed", async () => {
  const session = admin.session("packed-" + process.pid);
  await fetch(admin.baseUrl + "/skills/auth-required/invoke", { method: "POST", headers: session.headers, body: "{}" });
  await fetch(admin.baseUrl + "/skills/auth-required/invoke", { method: "POST", headers: session.headers, body: "{}" });
  const error: unknown = await session.verdict().then(() => undefined, (e: unknown) => e);
  assert.ok(error instanceof VerdictError);
  assert.equal(error.findings[0]?.rule, "non-retryable-retried");
  await assert.rejects(admin.verdict("packed-nobody"), UnknownSessionError);
  assert.equal(typeof mockskillMatchers.toBeClean, "function");
});

test("the container entry says what it needs where testcontainers is not installed", async () => {
  const { startMockskill } = await import("mockskill/container");
  await assert.rejects(startMockskill(), /needs the testcontainers package/);
});
`;

let project: string;
let server: Served;

before(async () => {
  project = await mkdtemp(join(tmpdir(), "mockskill-packed-"));
  server = await serve();
});
after(async () => {
  await server.stop();
  await rm(project, { recursive: true, force: true });
});

test("a project that installs the packed package type-checks and passes against a real server", async () => {
  // dist/ is built already: pack it as it is (prepack would build again).
  const packed = await run(npm, ["pack", "--ignore-scripts", "--pack-destination", project], { cwd: PACKAGE });
  const tarball = join(project, packed.stdout.trim().split("\n").pop() ?? "");
  const consumer = join(project, "consumer");
  await run("mkdir", [consumer]);
  await writeFile(join(consumer, "package.json"), JSON.stringify({ name: "consumer", private: true, type: "module" }));
  await run(npm, ["install", "--offline", "--no-audit", "--no-fund", "--ignore-scripts", tarball], { cwd: consumer });
  await writeFile(join(consumer, "consumer.test.ts"), CONSUMER);
  // The runners' declarations ship too (test/runners/ type-checks them, linked).
  const installed = join(consumer, "node_modules", "mockskill");
  const manifest = JSON.parse(await readFile(join(installed, "package.json"), "utf8")) as {
    exports: Record<string, { types?: string }>;
  };
  for (const runner of ["vitest", "jest"]) {
    const types = manifest.exports[`./${runner}`]?.types ?? `(mockskill/${runner} not exported)`;
    assert.ok(existsSync(join(installed, types)), `mockskill/${runner}'s types are not in the tarball: ${types}`);
  }
  await writeFile(
    join(consumer, "tsconfig.json"),
    JSON.stringify({
      compilerOptions: {
        target: "ES2022",
        module: "NodeNext",
        moduleResolution: "NodeNext",
        strict: true,
        typeRoots: [join(PACKAGE, "node_modules", "@types")],
        types: ["node"],
      },
      files: ["consumer.test.ts"],
    }),
  );
  const tsc = join(PACKAGE, "node_modules", "typescript", "bin", "tsc");
  await run(process.execPath, [tsc, "-p", consumer]).catch((error: { stdout: string }) => assert.fail(error.stdout));
  const { NODE_TEST_CONTEXT: _, ...env } = process.env;
  const tested = await run(process.execPath, ["--test", "--test-reporter=tap", "consumer.test.js"], {
    cwd: consumer,
    env: { ...env, MOCKSKILL_URL: server.url },
  }).catch((error: { stdout: string }) => assert.fail(error.stdout));
  assert.match(tested.stdout, /^# pass 2$/m);
});
