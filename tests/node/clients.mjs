// Drives got, ky and Node's own fetch for tests/transport/test_rate_limit_clients.py.
// Reads a JSON list of jobs on stdin ({client, config, url, session, abortMs}), runs
// them all at once and prints one JSON outcome per job, in order: {status} for an
// answer the client returned, {error, message, status} for what it threw.
import got from "got";
import ky from "ky";

// The retry configurations the table names. A skill's invocation is a POST, which
// neither got nor ky retries unless told: "usual" is their retry for status codes
// with POST added, "default" their defaults, "max-retry-after" a 1 s cap on waits.
const GOT = {
  usual: {retry: {limit: 3, methods: ["POST"]}},
  default: {},
  "max-retry-after": {retry: {limit: 3, methods: ["POST"], maxRetryAfter: 1000}},
};
const KY = {
  usual: {retry: {limit: 3, methods: ["post"]}},
  default: {},
  "max-retry-after": {retry: {limit: 3, methods: ["post"], maxRetryAfter: 1000}},
};

const CLIENTS = {
  async got(job, headers, signal) {
    const answer = await got.post(job.url, {...GOT[job.config], headers, body: "{}", signal});
    return answer.statusCode;
  },
  async ky(job, headers, signal) {
    const answer = await ky.post(job.url, {...KY[job.config], headers, body: "{}", signal});
    await answer.text();
    return answer.status;
  },
  async fetch(job, headers, signal) {
    const answer = await fetch(job.url, {method: "POST", headers, body: "{}", signal});
    await answer.text();
    return answer.status;
  },
};

async function run(job) {
  const headers = {"Mockskill-Session": job.session, "Content-Type": "application/json"};
  // The test's own deadline: a client that would wait longer is stopped here.
  const signal = AbortSignal.timeout(job.abortMs);
  try {
    return {status: await CLIENTS[job.client](job, headers, signal)};
  } catch (error) {
    return {error: error.name, message: error.message, status: error.response?.statusCode ?? error.response?.status ?? null};
  }
}

let input = "";
for await (const chunk of process.stdin) input += chunk;
console.log(JSON.stringify(await Promise.all(JSON.parse(input).map(run))));
