// The TypeScript package's container helper: from the call to healthy, beside
// `docker run` + health polling by hand, in the same run (issue 32).
//
// Target: the helper's median within 1.5 x the by-hand median.
//
// Each round starts the image both ways, in turn (the order alternates), and
// takes the time from just before the start to the first 200 of
// GET /__admin/health:
//
// - by hand: `docker run --detach --rm` (host networking on an engine without
//   a bridge, else a port published to 127.0.0.1), then a new GET every 5 ms;
// - helper: `startMockskill({ image })` from typescript/dist, which resolves
//   once the health route answers (Testcontainers creates and starts the
//   container through the engine's API; the helper waits for the banner under
//   host networking and polls health every 20 ms).
//
// One start of each before the rounds is reported apart and not counted: the
// helper's first start also finds the engine (Testcontainers' discovery, once
// per process), the first `docker run` warms the engine's caches.
//
// Run (the image built from the Dockerfile, typescript/ built):
//
//   eval "$(.ci/setup-docker)"; docker build --network host --build-arg BASE_IMAGE="$BASE_IMAGE" -t mockskill .
//   (cd typescript && npm ci && npm run build)
//   TESTCONTAINERS_HOST_OVERRIDE=127.0.0.1 TESTCONTAINERS_RYUK_DISABLED=true \
//     node bench/ts_container.mjs --image mockskill --rounds 10
//
// (the two variables only where the engine has no bridge network: the private one)
import { execFile } from "node:child_process";
import { createServer } from "node:net";
import os from "node:os";
import { parseArgs } from "node:util";
import { promisify } from "node:util";

const { startMockskill } = await import(new URL("../typescript/dist/src/container.js", import.meta.url).href);

const TARGET = 1.5;
const { values } = parseArgs({
  options: { image: { type: "string", default: "mockskill:latest" }, rounds: { type: "string", default: "10" } },
});
const image = values.image;
const rounds = Number(values.rounds);
const run = promisify(execFile);

async function docker(...args) {
  return (await run("docker", args, { timeout: 60_000 })).stdout.trim();
}

async function hasBridge() {
  try {
    await docker("network", "inspect", "bridge");
    return true;
  } catch {
    return false;
  }
}

async function freePort() {
  const server = createServer();
  await new Promise((resolve) => server.listen(0, "127.0.0.1", resolve));
  const { port } = server.address();
  await new Promise((resolve) => server.close(resolve));
  return port;
}

async function healthy(url) {
  try {
    return (await fetch(`${url}/__admin/health`, { signal: AbortSignal.timeout(1_000) })).status === 200;
  } catch {
    return false;
  }
}

const bridge = await hasBridge();

/** `docker run` + polling by hand: ms to healthy, and how to remove the container. */
async function byHand() {
  const started = performance.now();
  let id;
  let url;
  if (bridge) {
    id = await docker("run", "--detach", "--rm", "-p", "127.0.0.1::8080", "-e", "MOCKSKILL_QUIET=1", image);
    const published = await docker("port", id, "8080/tcp");
    url = `http://${published.split("\n")[0]}`;
  } else {
    const port = await freePort();
    id = await docker(
      "run", "--detach", "--rm", "--network", "host",
      "-e", `MOCKSKILL_PORT=${port}`, "-e", "MOCKSKILL_HOST=127.0.0.1", "-e", "MOCKSKILL_QUIET=1", image,
    );
    url = `http://127.0.0.1:${port}`;
  }
  while (!(await healthy(url))) await new Promise((wake) => setTimeout(wake, 5));
  const ms = performance.now() - started;
  return { ms, stop: () => docker("rm", "--force", id) };
}

/** The helper: ms to healthy, and how to stop it. */
async function helper() {
  const started = performance.now();
  const mock = await startMockskill({ image });
  const ms = performance.now() - started;
  return { ms, stop: () => mock.stop() };
}

async function timed(how) {
  const { ms, stop } = await how();
  await stop();
  return ms;
}

function quantile(values, q) {
  const sorted = [...values].sort((a, b) => a - b);
  return sorted[Math.min(sorted.length - 1, Math.floor(q * sorted.length))];
}
const median = (values) => {
  const sorted = [...values].sort((a, b) => a - b);
  const middle = sorted.length / 2;
  return sorted.length % 2 ? sorted[Math.floor(middle)] : (sorted[middle - 1] + sorted[middle]) / 2;
};

const first = { hand: await timed(byHand), helper: await timed(helper) };
const times = { hand: [], helper: [] };
for (let round = 0; round < rounds; round++) {
  const order = round % 2 ? ["helper", "hand"] : ["hand", "helper"];
  for (const name of order) times[name].push(await timed(name === "hand" ? byHand : helper));
}

const row = (name, label) =>
  `| ${label} | ${first[name].toFixed(0)} | ${median(times[name]).toFixed(0)} | ${quantile(times[name], 0.9).toFixed(0)} | ${Math.min(...times[name]).toFixed(0)} | ${Math.max(...times[name]).toFixed(0)} |`;
const ratio = median(times.helper) / median(times.hand);
console.log(`## Container helper: start to healthy (${rounds} rounds, ${bridge ? "published port" : "host networking"})\n`);
console.log("| how | first (ms) | median (ms) | p90 (ms) | min (ms) | max (ms) |");
console.log("|---|---|---|---|---|---|");
console.log(row("hand", "`docker run` + polling by hand"));
console.log(row("helper", "`startMockskill()`"));
console.log(`\nhelper / by hand (medians): ${ratio.toFixed(2)} (target <= ${TARGET}: ${ratio <= TARGET ? "met" : "NOT met"})`);
const engine = await docker("version", "--format", "{{.Server.Version}}");
console.log(
  `\nmachine: ${new Date().toISOString()}, ${os.cpus().length} CPUs, load ${os.loadavg()[0].toFixed(2)}, Node ${process.version}, Docker engine ${engine}, image ${image}`,
);
