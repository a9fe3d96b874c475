/**
 * The container helper's port and URL decision, for each network, without an engine: the
 * mapped-port path (bridge) cannot run on an engine without a bridge network, such as the
 * project's private one, where test/container.test.ts runs the host path for real.
 */
import assert from "node:assert/strict";
import { describe, test } from "node:test";

import { CONTAINER_PORT, reach, serverUrl, type StartedPorts } from "../src/networking.js";

/** A started container as Testcontainers reports it: mapped ports only for those exposed. */
function started(mapped: Record<number, number>, banner?: number): StartedPorts {
  return {
    mappedPort: (containerPort) => {
      const port = mapped[containerPort];
      if (port === undefined) throw new Error(`No port mapping found for container port ${containerPort}`);
      return port;
    },
    bannerPort: async () => {
      if (banner === undefined) throw new Error("it printed no 'serving ... at URL' banner in time");
      return banner;
    },
  };
}

describe("on a bridge network", () => {
  test("the server listens on 8080 in the container, and is reached on the port the engine mapped it to", async () => {
    const way = reach("bridge", undefined, { MOCKSKILL_QUIET: "1" });
    assert.equal(way.exposedPort, CONTAINER_PORT);
    assert.deepEqual(way.env, { MOCKSKILL_QUIET: "1", MOCKSKILL_PORT: "8080" });
    const port = await way.hostPort(started({ 8080: 32768 }));
    assert.equal(port, 32768);
    assert.equal(serverUrl("http", "localhost", port), "http://localhost:32768");
  });

  test("a port asked for is the container's, still mapped, and the banner is not waited for", async () => {
    const way = reach("bridge", 9000, { MOCKSKILL_PORT: "1" });
    assert.equal(way.exposedPort, 9000);
    assert.equal(way.env["MOCKSKILL_PORT"], "9000");
    assert.equal(await way.hostPort(started({ 9000: 49153 }, 9000)), 49153);
  });
});

describe("on the host's network", () => {
  test("nothing is mapped: the server takes any free port of the loopback, read from its banner", async () => {
    const way = reach("host", undefined, {});
    assert.equal(way.exposedPort, undefined);
    assert.deepEqual(way.env, { MOCKSKILL_HOST: "127.0.0.1", MOCKSKILL_PORT: "0" });
    assert.equal(await way.hostPort(started({}, 41234)), 41234);
    await assert.rejects(way.hostPort(started({})), /no 'serving ... at URL' banner/);
  });

  test("a port asked for is the host's, used as it is; a host the caller names is kept", async () => {
    const way = reach("host", 9100, { MOCKSKILL_HOST: "0.0.0.0" });
    assert.deepEqual(way.env, { MOCKSKILL_HOST: "0.0.0.0", MOCKSKILL_PORT: "9100" });
    assert.equal(await way.hostPort(started({})), 9100);
  });
});

test("the URL puts an IPv6 host in brackets", () => {
  assert.equal(serverUrl("https", "::1", 8443), "https://[::1]:8443");
  assert.equal(serverUrl("https", "127.0.0.1", 8443), "https://127.0.0.1:8443");
});
