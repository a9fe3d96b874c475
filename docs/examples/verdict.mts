// One line in a TypeScript test: assert the verdict's status (Node.js 18+, fetch, no packages).
//
//   tsc --strict --module nodenext verdict.mts && node verdict.mjs [BASE_URL] [SESSION]
//
// 200: the session is clean (and covered as required); 409: it is not, and the body (an
// RFC 9457 problem) says why; 404: the journal never saw the session. Exits 1 unless 200.
import assert from "node:assert/strict";

const [base = "http://localhost:8080", session = "ci-7"] = process.argv.slice(2);
const verdict: Response = await fetch(
  `${base}/__admin/verdict?session=${encodeURIComponent(session)}`,
);

// In a Vitest, Jest or node:test test, the one line:
assert.equal(verdict.status, 200, `${verdict.status} ${await verdict.text()}`);
console.log(`ok: session ${session} is clean`);
