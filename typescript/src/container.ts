/**
 * mockskill in a container, through Testcontainers for Node (`import { startMockskill }
 * from "mockskill/container"`).
 *
 * Testcontainers is an optional peer dependency: it is imported when a container is
 * started, so the client and the matchers work without it. The helper starts the image,
 * waits for the health route itself (Testcontainers' own port checks run commands in the
 * container, and mapped ports do not exist under host networking), and hands back the
 * base URL with an admin client. If the server does not come up, the container's logs are
 * printed and the error says why.
 *
 * Networking: on a usual engine the container's port is mapped to a free port of the
 * host; on an engine without a bridge network (a CI sandbox, `dockerd --bridge=none`) the
 * container shares the host's network and serves on a port of its own (any free one
 * unless `port` is given), read from the banner it prints. `network: "auto"` (default)
 * asks the engine which of the two it can do.
 */
import type { Readable } from "node:stream";

import { MockskillClient } from "./client.js";
import { MockskillError } from "./errors.js";
import { type Network, reach, serverUrl } from "./networking.js";
import { httpsTransport } from "./transport.js";

export interface ContainerOptions {
  /** The image to run (default `mockskill:latest`; build it with `docker build -t mockskill .`). */
  image?: string;
  /** A folder of scenario files, copied into the container and served instead of the bundled ones. */
  scenarios?: string;
  /** Serve HTTPS with a certificate from a CA made at start; the admin client trusts it. */
  tls?: boolean;
  /**
   * The port the server listens on in the container (default 8080, mapped to a free port of
   * the host); under host networking, the host's port (default: any free one).
   */
  port?: number;
  /** `bridge`: a mapped port; `host`: the host's network; `auto` (default): bridge where the engine has one. */
  network?: "auto" | "bridge" | "host";
  /** An admin token the server asks for; the handle's admin client sends it. */
  adminToken?: string;
  /** More environment for `mockskill serve` (`MOCKSKILL_SEED`, `MOCKSKILL_QUIET`, ...). */
  env?: Record<string, string>;
  /** How long the server may take to answer its health route (default 60 000 ms). */
  startupTimeoutMs?: number;
  /** Where the container's logs go when it fails to start (default: stderr); `false`: nowhere. */
  onFailureLogs?: ((logs: string) => void) | false;
}

/** A started mockskill: where it serves, an admin client for it, and how to stop it. */
export interface StartedMockskill {
  /** The base URL consumers use: `http://localhost:32768`. */
  readonly url: string;
  readonly host: string;
  readonly port: number;
  readonly network: Network;
  readonly containerId: string;
  /** The admin client, with the token and (under `tls`) the server's CA. */
  readonly admin: MockskillClient;
  /** The CA's PEM under `tls` (for the consumer's HTTPS client), else `undefined`. */
  readonly ca: string | undefined;
  /** Everything the container printed so far. */
  logs(): string;
  /** Stops and removes the container. */
  stop(): Promise<void>;
}

const DEFAULT_IMAGE = "mockskill:latest";
// Beside the image's /scenarios, not into it: a copy merges, and the bundled ones would stay.
const SCENARIOS_DIR = "/mockskill-scenarios";
// The banner's first line says where it serves, the real port included (`--port 0`).
const BANNER = /serving .* at (https?):\/\/\S*?:(\d+)\b/;

type Testcontainers = typeof import("testcontainers");

/** Starts mockskill in a container and waits until its health route answers `ok`. */
export async function startMockskill(options: ContainerOptions = {}): Promise<StartedMockskill> {
  const tc = await importTestcontainers();
  const runtime = await runtimeClient(tc);
  const network = options.network === undefined || options.network === "auto" ? await detectNetwork(runtime) : options.network;
  const host = runtime.info.containerRuntime.host;
  const scheme = options.tls ? "https" : "http";

  const env: Record<string, string> = { MOCKSKILL_QUIET: "1", ...options.env };
  if (options.tls) {
    env["MOCKSKILL_TLS"] = "1";
    env["MOCKSKILL_TLS_NAMES"] = [host, env["MOCKSKILL_TLS_NAMES"]].filter(Boolean).join(" ");
  }
  if (options.adminToken !== undefined) env["MOCKSKILL_ADMIN_TOKEN"] = options.adminToken;
  if (options.scenarios !== undefined) env["MOCKSKILL_SCENARIOS"] = SCENARIOS_DIR;
  const way = reach(network, options.port, env);
  let container = new tc.GenericContainer(options.image ?? DEFAULT_IMAGE).withWaitStrategy(startedWait());
  // The host's network maps no port: the server takes one of the host's own.
  container = way.exposedPort === undefined ? container.withNetworkMode("host") : container.withExposedPorts(way.exposedPort);
  if (options.scenarios !== undefined) {
    container = container.withCopyDirectoriesToContainer([{ source: options.scenarios, target: SCENARIOS_DIR }]);
  }
  const output = new Output();
  container = container.withEnvironment({ ...way.env }).withLogConsumer((stream) => output.follow(stream));

  const deadline = performance.now() + (options.startupTimeoutMs ?? 60_000);
  const started = await container.start();
  try {
    const port = await way.hostPort({
      mappedPort: (containerPort) => started.getMappedPort(containerPort),
      bannerPort: () => output.bannerPort(deadline),
    });
    const url = serverUrl(scheme, started.getHost(), port);
    const clientOptions = options.adminToken === undefined ? {} : { adminToken: options.adminToken };
    let ca: string | undefined;
    if (options.tls) {
      // Ask whether it answers, not who it is (as the image's HEALTHCHECK does), then take its CA.
      const probe = new MockskillClient(url, { ...clientOptions, transport: httpsTransport("insecure") });
      await Promise.race([probe.waitUntilHealthy({ timeoutMs: remaining(deadline), intervalMs: 20 }), output.exited]);
      ca = await probe.caCertificate();
    }
    const admin = new MockskillClient(url, ca === undefined ? clientOptions : { ...clientOptions, ca });
    await Promise.race([admin.waitUntilHealthy({ timeoutMs: remaining(deadline), intervalMs: 20 }), output.exited]);
    return {
      url,
      host: started.getHost(),
      port,
      network,
      containerId: started.getId(),
      admin,
      ca,
      logs: () => output.text,
      stop: async () => {
        await started.stop({ timeout: 2_000 });
      },
    };
  } catch (error) {
    const logs = output.text;
    const print = options.onFailureLogs ?? ((text: string) => process.stderr.write(text));
    if (print !== false) print(`mockskill container ${started.getId().slice(0, 12)} failed to start; its logs:\n${logs}\n`);
    await started.stop({ timeout: 0 }).catch(() => undefined);
    const reason = error instanceof Error ? error.message : String(error);
    throw new MockskillError(0, "CONTAINER_NOT_HEALTHY", `mockskill in ${options.image ?? DEFAULT_IMAGE} did not come up: ${reason}`, { logs });
  }
}

async function importTestcontainers(): Promise<Testcontainers> {
  try {
    return await import("testcontainers");
  } catch (error) {
    throw new MockskillError(
      0,
      "TESTCONTAINERS_MISSING",
      `startMockskill needs the testcontainers package (an optional peer dependency): npm install --save-dev testcontainers (${String(error)})`,
    );
  }
}

type Runtime = Awaited<ReturnType<Testcontainers["getContainerRuntimeClient"]>>;

async function runtimeClient(tc: Testcontainers): Promise<Runtime> {
  try {
    return await tc.getContainerRuntimeClient();
  } catch (error) {
    // Testcontainers looks up the bridge network's gateway when it runs inside a container
    // itself; an engine without one needs the host said.
    throw new MockskillError(
      0,
      "NO_CONTAINER_ENGINE",
      `no container engine answers Testcontainers (${String(error)}); set DOCKER_HOST, and on an engine` +
        " without a bridge network TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 (and TESTCONTAINERS_RYUK_DISABLED=true" +
        " where its reaper image cannot be pulled)",
    );
  }
}

/** `bridge` where the engine has its default bridge network, else `host`. */
async function detectNetwork(runtime: Runtime): Promise<Network> {
  try {
    await runtime.network.getById("bridge").inspect();
    return "bridge";
  } catch {
    return "host";
  }
}

function remaining(deadline: number): number {
  return Math.max(0, Math.round(deadline - performance.now()));
}

/** Testcontainers' wait, satisfied once the container runs: the health route is waited for after. */
function startedWait(): import("testcontainers").WaitStrategy {
  let timeout = 60_000;
  let set = false;
  const strategy = {
    waitUntilReady: async () => undefined,
    withStartupTimeout: (ms: number) => {
      timeout = ms;
      set = true;
      return strategy;
    },
    isStartupTimeoutSet: () => set,
    getStartupTimeout: () => timeout,
  };
  return strategy;
}

/** The container's output as it comes, kept for the failure report and read for the banner. */
class Output {
  text = "";
  /** Rejects when the output ends: the container stopped, so waiting for it is over. */
  readonly exited: Promise<never>;
  #ended = false;
  #exit: (error: Error) => void = () => undefined;
  #waiting: (() => void)[] = [];

  constructor() {
    this.exited = new Promise<never>((_, reject) => {
      this.#exit = reject;
    });
    this.exited.catch(() => undefined); // raced, never awaited alone
  }

  follow(stream: Readable): void {
    stream.on("data", (chunk: Buffer | string) => {
      this.text += chunk.toString();
      this.#wake();
    });
    stream.on("end", () => {
      this.#ended = true;
      this.#exit(new Error("the container exited before it served"));
      this.#wake();
    });
  }

  async bannerPort(deadline: number): Promise<number> {
    for (;;) {
      const match = BANNER.exec(this.text);
      if (match?.[2] !== undefined) return Number(match[2]);
      if (this.#ended) throw new Error("the container exited before it served");
      const left = remaining(deadline);
      if (left === 0) throw new Error("it printed no 'serving ... at URL' banner in time");
      await new Promise<void>((resolve) => {
        const timer = setTimeout(resolve, Math.min(left, 250));
        this.#waiting.push(() => {
          clearTimeout(timer);
          resolve();
        });
      });
    }
  }

  #wake(): void {
    for (const wake of this.#waiting.splice(0)) wake();
  }
}
