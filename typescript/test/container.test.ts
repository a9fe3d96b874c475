/**
 * The container helper against the image, where a Docker engine answers.
 *
 * MOCKSKILL_IMAGE names the image (tests/test_typescript_package.py builds it from the
 * repository's Dockerfile where an engine answers). Without an image or an engine these
 * tests skip, saying which, unless MOCKSKILL_REQUIRE_DOCKER=1 (CI) makes that a failure.
 * On an engine without a bridge network (the project's private one) the helper runs the
 * container on the host's network; Testcontainers then needs the host said
 * (TESTCONTAINERS_HOST_OVERRIDE), and its reaper, an image this machine cannot pull, off.
 */
import assert from "node:assert/strict";
import { mkdtemp, rm, writeFile } from "node:fs/promises";
import { request } from "node:https";
import { tmpdir } from "node:os";
import { join } from "node:path";
import { after, before, describe, test } from "node:test";

import { MockskillError, UnreachableError } from "mockskill";
import { startMockskill } from "mockskill/container";

import { scenario, politeInvoke } from "./consumer.js";

const skills = scenario("ts-quote");
const IMAGE = process.env["MOCKSKILL_IMAGE"];
const REQUIRED = process.env["MOCKSKILL_REQUIRE_DOCKER"] === "1";
process.env["TESTCONTAINERS_RYUK_DISABLED"] ??= "true"; // each test stops its own container

/** Why these tests cannot run here, or undefined when they can. */
async function unavailable(): Promise<string | undefined> {
  if (!IMAGE) return "no mockskill image: MOCKSKILL_IMAGE names none (tests/test_typescript_package.py builds one where a Docker engine answers)";
  try {
    const { getContainerRuntimeClient } = await import("testcontainers");
    await getContainerRuntimeClient();
  } catch (error) {
    return `no Docker engine answers Testcontainers, neither with a bridge network nor with host networking (TESTCONTAINERS_HOST_OVERRIDE): ${String(error)}`;
  }
  return undefined;
}

const reason = await unavailable();
if (reason !== undefined && REQUIRED) throw new Error(`${reason}; MOCKSKILL_REQUIRE_DOCKER=1 requires these tests`);
const options = reason === undefined ? {} : { skip: reason };

/** Why the mapped-port path cannot run here (no engine, or one without a bridge network). */
async function noBridge(): Promise<string | undefined> {
  if (reason !== undefined) return reason;
  const { getContainerRuntimeClient } = await import("testcontainers");
  try {
    await (await getContainerRuntimeClient()).network.getById("bridge").inspect();
    return undefined;
  } catch {
    return (
      "no bridge network on this engine (the project's private one runs containers on the host's network" +
      " only): the mapped-port path needs a usual Docker engine; its port and URL decision is unit-tested" +
      " in test/networking.test.ts"
    );
  }
}
const bridgeReason = await noBridge();

describe("startMockskill", options, () => {
  let folder: string;

  before(async () => {
    folder = await mkdtemp(join(tmpdir(), "mockskill-ts-"));
    await writeFile(join(folder, "quote.yaml"), skills.text);
  });
  after(() => rm(folder, { recursive: true, force: true }));

  test("serves the scenarios of a folder, healthy once it resolves, gone once stopped", async () => {
    const mock = await startMockskill({ image: IMAGE!, scenarios: folder });
    try {
      assert.match(mock.url, /^http:\/\/[^:]+:\d+$/);
      assert.deepEqual((await mock.admin.health()).scenarios, ["ts-quote"]);
      const session = mock.admin.session(`container-${process.pid}`);
      assert.equal((await politeInvoke(mock.url, session, skills.quote, {})).status, 200);
      assert.equal((await session.verdict({ require: ["ENDPOINT_UNREACHABLE"] })).clean, true);
    } finally {
      await mock.stop();
    }
    await assert.rejects(mock.admin.health(), UnreachableError);
  });

  test("on a bridge network: the container's port mapped to a free one of the host", { skip: bridgeReason ?? false }, async () => {
    const mock = await startMockskill({ image: IMAGE!, network: "bridge" });
    try {
      assert.equal(mock.network, "bridge");
      assert.equal(mock.url, `http://${mock.host}:${mock.port}`);
      assert.equal((await mock.admin.health()).status, "ok");
    } finally {
      await mock.stop();
    }
  });

  test("--tls: HTTPS from the CA it made, which the admin client trusts", async () => {
    const mock = await startMockskill({ image: IMAGE!, tls: true, adminToken: "t0ken" });
    try {
      assert.match(mock.url, /^https:/);
      assert.match(mock.ca ?? "", /BEGIN CERTIFICATE/);
      assert.equal((await mock.admin.health()).status, "ok");
      // Without its CA, a client refuses the certificate: it is HTTPS for real.
      const refused = await new Promise<string>((resolve) => {
        request(`${mock.url}/skills`, (reply) => resolve(String(reply.statusCode))).on("error", (e) => resolve(e.message)).end();
      });
      assert.match(refused, /self.signed|unable to verify|certificate/i);
    } finally {
      await mock.stop();
    }
  });

  test("a server that does not come up: an error saying why, and its logs printed", async () => {
    const bad = await mkdtemp(join(tmpdir(), "mockskill-ts-bad-"));
    await writeFile(join(bad, "bad.yaml"), "name: bad\nskills:\n  - id: 3\n");
    let printed = "";
    try {
      await assert.rejects(
        startMockskill({ image: IMAGE!, scenarios: bad, startupTimeoutMs: 20_000, onFailureLogs: (logs) => (printed += logs) }),
        (error: unknown) => {
          assert.ok(error instanceof MockskillError);
          assert.equal(error.code, "CONTAINER_NOT_HEALTHY");
          assert.match(error.message, /exited before it served/);
          return true;
        },
      );
      assert.match(printed, /failed to start; its logs:/);
      assert.match(printed, /bad\.yaml:3:\d+: skills\[0\]\.id: expected a string/);
    } finally {
      await rm(bad, { recursive: true, force: true });
    }
  });
});
