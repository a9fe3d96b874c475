/**
 * The admin client: mockskill's `/__admin` surface from TypeScript (docs/admin.md).
 *
 * Every method sends one request and answers the route's body, typed; every error
 * mockskill answers becomes a {@link MockskillError} (errors.ts), and no answer at all an
 * {@link UnreachableError}. A {@link Session} is a name for one test's requests: the
 * header the consumer sends, and the admin calls that read that session alone.
 */
import {
  type Finding,
  type Json,
  MockskillError,
  UnreachableError,
  errorFromResponse,
} from "./errors.js";
import { type Transport, fetchTransport, httpsTransport } from "./transport.js";

/** The header that puts a consumer's request in a session (`default` without one). */
export const SESSION_HEADER = "Mockskill-Session";

export interface ClientOptions {
  /** The server's admin token (`mockskill serve --admin-token`), sent as a bearer token. */
  adminToken?: string;
  /** The PEM of the CA that signed the server's certificate (`--tls`: `GET /__admin/tls/ca.pem`). */
  ca?: string;
  /** A `fetch` to send with instead of the platform's (ignored with `ca`). */
  fetch?: typeof fetch;
  /** How requests are sent, instead of both of the above (transport.ts). */
  transport?: Transport;
  /** How long one request may take before it counts as unanswered (default 10 000 ms). */
  timeoutMs?: number;
}

export interface Health {
  status: string;
  version: string;
  seed: number;
  scenarios: string[];
  skills: number;
  [key: string]: unknown;
}

export interface LoadOptions {
  /** `yaml` (default) or `json`: the text's type, sent as its Content-Type. */
  format?: "yaml" | "json";
  /** What the text stands for, as a file name would, in problems and as a default name. */
  file?: string;
  /** Take the place of a loaded scenario of the same name (default: a 409). */
  replace?: boolean;
  /** Serve it at once (default `true`). */
  active?: boolean;
}

/** The journal's filters (docs/admin.md, Filters); all optional, combined with *and*. */
export interface JournalFilter {
  session?: string;
  skill?: string;
  method?: string;
  path?: string;
  endpoint?: string;
  status?: number;
  error_code?: string;
  replica?: string;
  since?: number;
  until?: number;
  limit?: number;
}

/** One journal entry: docs/admin.md lists every field; the ones tests read most are typed. */
export interface JournalEntry {
  id: number;
  session: string;
  method: string;
  path: string;
  status: number | null;
  skill: string | null;
  error_code: string | null;
  [key: string]: unknown;
}

/** A request the consumer sent, with what it sent (`GET /__admin/requests`). */
export interface SentRequest extends JournalEntry {
  target: string | null;
  headers: [string, string][] | null;
  body: string | null;
}

/** What `POST /__admin/verify` counts: the requests named, and how many there must be. */
export interface VerifyClaim {
  session?: string;
  skill?: string;
  method?: string;
  path?: string;
  when?: { [key: string]: Json };
  count?: number | { equals?: number; at_least?: number; at_most?: number };
}

export interface Verification {
  held: boolean;
  count: number;
  expected: string;
  requests: string;
  read: number;
  entries: JournalEntry[];
  [key: string]: unknown;
}

export interface ReportOptions {
  /** The sessions to audit (default: every session). */
  session?: string | string[];
  skill?: string;
  /** The audit's policy: `initial_delay_ms`, `tolerance_ms`, ... (docs/audit.md). */
  policy?: Record<string, number | string>;
}

export interface ReportSession {
  session: string;
  findings: Finding[];
  [key: string]: unknown;
}

export interface Report {
  sessions: ReportSession[];
  [key: string]: unknown;
}

export interface VerdictOptions {
  /** Coverage to require, the names `mockskill report --require` takes. */
  require?: string[];
  /** The audit's policy, as the report takes it (docs/audit.md). */
  policy?: Record<string, number | string>;
}

/** A clean verdict (200): the session made requests, drew no finding and is covered as asked. */
export interface Verdict {
  session: string;
  clean: true;
  requests: number;
  required: string[];
  covered: string[];
  [key: string]: unknown;
}

export interface WaitOptions {
  /** Give up after this long (default 30 000 ms). */
  timeoutMs?: number;
  /** Between two probes (default 50 ms). */
  intervalMs?: number;
}

/** A client of one mockskill server's admin surface. */
export class MockskillClient {
  /** The server's base URL, without a trailing slash: `http://127.0.0.1:8080`. */
  readonly baseUrl: string;
  readonly #headers: Record<string, string>;
  readonly #send: Transport;
  readonly #timeoutMs: number;

  constructor(baseUrl: string, options: ClientOptions = {}) {
    this.baseUrl = baseUrl.replace(/\/+$/, "");
    this.#headers = options.adminToken ? { Authorization: `Bearer ${options.adminToken}` } : {};
    this.#send = options.transport ?? (options.ca ? httpsTransport(options.ca) : fetchTransport(options.fetch));
    this.#timeoutMs = options.timeoutMs ?? 10_000;
  }

  /** A session of this server: the header for the consumer, and admin calls for it alone. */
  session(name: string): Session {
    return new Session(this, name);
  }

  /** What is served (`GET /__admin/health`). */
  health(): Promise<Health> {
    return this.#call<Health>("GET", "/__admin/health");
  }

  /**
   * Probes the health route until it answers 200 `ok`, or rejects once *timeoutMs* is
   * over with the last reason (an answer that was no success is thrown at once: a wrong
   * token does not get better by waiting).
   */
  async waitUntilHealthy({ timeoutMs = 30_000, intervalMs = 50 }: WaitOptions = {}): Promise<Health> {
    const deadline = performance.now() + timeoutMs;
    let last: unknown;
    for (;;) {
      try {
        const health = await this.health();
        if (health.status === "ok") return health;
        last = new Error(`health says ${JSON.stringify(health.status)}`);
      } catch (error) {
        if (!(error instanceof UnreachableError)) throw error;
        last = error;
      }
      if (performance.now() + intervalMs > deadline) {
        const reason = last instanceof Error ? last.message : String(last);
        throw new UnreachableError(0, "NOT_HEALTHY", `${this.baseUrl} was not healthy within ${timeoutMs} ms: ${reason}`);
      }
      await new Promise((resolve) => setTimeout(resolve, intervalMs));
    }
  }

  /** The PEM of the CA that signed a `--tls` server's certificate (`GET /__admin/tls/ca.pem`). */
  caCertificate(): Promise<string> {
    return this.#call<string>("GET", "/__admin/tls/ca.pem", undefined, undefined, false);
  }

  /** Loads scenarios from YAML or JSON text; the names of those loaded. Problems: an `InvalidInputError`. */
  async loadScenarios(text: string, options: LoadOptions = {}): Promise<string[]> {
    const query = new URLSearchParams();
    if (options.file !== undefined) query.set("file", options.file);
    if (options.replace !== undefined) query.set("replace", String(options.replace));
    if (options.active !== undefined) query.set("active", String(options.active));
    const type = options.format === "json" ? "application/json" : "application/yaml";
    const answer = await this.#call<{ scenarios: { name: string }[] }>(
      "POST",
      `/__admin/scenarios${suffix(query)}`,
      text,
      type,
    );
    return answer.scenarios.map((scenario) => scenario.name);
  }

  /** Unloads one scenario by name. */
  async removeScenario(name: string): Promise<void> {
    await this.#call("DELETE", `/__admin/scenarios/${encodeURIComponent(name)}`);
  }

  /** Forgets one session's positions, draws, states and journal; the others' are kept. */
  async reset(session: string): Promise<void> {
    if (!session) throw new TypeError("reset() needs a session name; resetAll() forgets everyone's");
    await this.#call("POST", `/__admin/reset?${new URLSearchParams({ session })}`);
  }

  /** Forgets every session's positions, draws and states, issued tokens and the whole journal. */
  async resetAll(): Promise<void> {
    await this.#call("POST", "/__admin/reset?all=true");
  }

  /** The journal's entries the filter keeps, oldest first. */
  async journal(filter: JournalFilter = {}): Promise<JournalEntry[]> {
    const answer = await this.#call<{ entries: JournalEntry[] }>("GET", `/__admin/journal${filters(filter)}`);
    return answer.entries;
  }

  /** The requests the consumer sent, with what it sent, oldest first. */
  async requests(filter: JournalFilter = {}): Promise<SentRequest[]> {
    const answer = await this.#call<{ requests: SentRequest[] }>("GET", `/__admin/requests${filters(filter)}`);
    return answer.requests;
  }

  /** Whether the consumer sent the requests named; a `VerificationError` (409) when not. */
  verify(claim: VerifyClaim): Promise<Verification> {
    return this.#call<Verification>("POST", "/__admin/verify", JSON.stringify(claim), "application/json");
  }

  /** The retry audit and coverage (`GET /__admin/report`, docs/audit.md). */
  report({ session, skill, policy = {} }: ReportOptions = {}): Promise<Report> {
    const query = new URLSearchParams();
    for (const name of session === undefined ? [] : [session].flat()) query.append("session", name);
    if (skill !== undefined) query.set("skill", skill);
    for (const [name, value] of Object.entries(policy)) query.set(name, String(value));
    return this.#call<Report>("GET", `/__admin/report${suffix(query)}`);
  }

  /**
   * The session's verdict (`GET /__admin/verdict`): resolves when it is clean and covered
   * as required; a `VerdictError` with the findings when not, an `UnknownSessionError`
   * (with close names) for a session the journal never saw.
   */
  verdict(session: string, { require = [], policy = {} }: VerdictOptions = {}): Promise<Verdict> {
    const query = new URLSearchParams({ session });
    for (const name of require) query.append("require", name);
    for (const [name, value] of Object.entries(policy)) query.set(name, String(value));
    return this.#call<Verdict>("GET", `/__admin/verdict?${query}`);
  }

  async #call<T>(method: string, path: string, body?: string, contentType?: string, json = true): Promise<T> {
    const headers = { Accept: json ? "application/json" : "*/*", ...this.#headers };
    if (contentType !== undefined) Object.assign(headers, { "Content-Type": contentType });
    let answer;
    try {
      answer = await this.#send({
        method,
        url: `${this.baseUrl}${path}`,
        headers,
        ...(body === undefined ? {} : { body }),
        timeoutMs: this.#timeoutMs,
      });
    } catch (error) {
      const reason = error instanceof Error ? ((error.cause as Error | undefined)?.message ?? error.message) : String(error);
      throw new UnreachableError(0, "UNREACHABLE", `${method} ${this.baseUrl}${path}: no answer (${reason})`);
    }
    if (answer.status < 200 || answer.status >= 300) {
      throw errorFromResponse(answer.status, answer.contentType, answer.body);
    }
    if (!json) return answer.body as T;
    try {
      return JSON.parse(answer.body) as T;
    } catch {
      throw new MockskillError(answer.status, "UNEXPECTED_RESPONSE", `${method} ${path} answered ${answer.status} with no JSON body`, {}, answer.body);
    }
  }
}

/** One test's session: its name, the header for its requests, and the admin calls for it. */
export class Session {
  readonly client: MockskillClient;
  readonly name: string;

  constructor(client: MockskillClient, name: string) {
    this.client = client;
    this.name = name;
  }

  /** The headers that put a request in this session: spread them into the consumer's. */
  get headers(): Record<string, string> {
    return { [SESSION_HEADER]: this.name };
  }

  verdict(options: VerdictOptions = {}): Promise<Verdict> {
    return this.client.verdict(this.name, options);
  }

  verify(claim: Omit<VerifyClaim, "session"> = {}): Promise<Verification> {
    return this.client.verify({ ...claim, session: this.name });
  }

  requests(filter: Omit<JournalFilter, "session"> = {}): Promise<SentRequest[]> {
    return this.client.requests({ ...filter, session: this.name });
  }

  report(options: Omit<ReportOptions, "session"> = {}): Promise<Report> {
    return this.client.report({ ...options, session: this.name });
  }

  reset(): Promise<void> {
    return this.client.reset(this.name);
  }
}

function filters(filter: JournalFilter): string {
  const query = new URLSearchParams();
  for (const [name, value] of Object.entries(filter)) {
    if (value !== undefined) query.set(name, String(value));
  }
  return suffix(query);
}

function suffix(query: URLSearchParams): string {
  const text = query.toString();
  return text ? `?${text}` : "";
}
