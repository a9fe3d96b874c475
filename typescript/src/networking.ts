/**
 * How a mockskill container is reached, decided from the network it runs on and the
 * `port` asked for: what the engine is asked for (a mapped port, or the host's network),
 * the server's listening settings, which host port it then answers on, and its URL.
 *
 * No engine here: `container.ts` applies the decision, so each network's path is tested
 * on its own (test/networking.test.ts) wherever the engine at hand offers only one.
 */

/** The container's port when none is asked for, on a bridge network. */
export const CONTAINER_PORT = 8080;

export type Network = "bridge" | "host";

/** What a started container tells about its ports. */
export interface StartedPorts {
  /** The host's port the engine mapped *containerPort* to (bridge only). */
  mappedPort(containerPort: number): number;
  /** The port the server's banner names (`serving ... at http://127.0.0.1:PORT`). */
  bannerPort(): Promise<number>;
}

/** One network's way of running the container and reaching its server. */
export interface Reach {
  readonly network: Network;
  /** The caller's environment with the server's listening settings. */
  readonly env: Readonly<Record<string, string>>;
  /** bridge: the container's port, to map to a free one of the host; host: none. */
  readonly exposedPort: number | undefined;
  /** The host's port the server answers on, once the container runs. */
  hostPort(started: StartedPorts): Promise<number>;
}

/** How to run and reach the server on *network*, given the `port` option and the environment. */
export function reach(network: Network, port: number | undefined, env: Readonly<Record<string, string>>): Reach {
  if (network === "host") {
    return {
      network,
      // Loopback of the host is every other process's too: listen there only, unless told.
      env: { ...env, MOCKSKILL_HOST: env["MOCKSKILL_HOST"] ?? "127.0.0.1", MOCKSKILL_PORT: String(port ?? 0) },
      exposedPort: undefined,
      // Any free port (0) is known only from the banner; a port asked for is the port.
      hostPort: async (started) => (port ? port : started.bannerPort()),
    };
  }
  const containerPort = port ?? CONTAINER_PORT;
  return {
    network,
    env: { ...env, MOCKSKILL_PORT: String(containerPort) },
    exposedPort: containerPort,
    hostPort: async (started) => started.mappedPort(containerPort),
  };
}

/** The base URL of a server at *host* and *port* (an IPv6 address in brackets). */
export function serverUrl(scheme: "http" | "https", host: string, port: number): string {
  return `${scheme}://${host.includes(":") ? `[${host}]` : host}:${port}`;
}
