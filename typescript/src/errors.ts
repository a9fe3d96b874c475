/**
 * The errors of the admin client: every error body mockskill answers with, as a typed error.
 *
 * mockskill answers its errors in two shapes: the unified body
 * `{"error": {"code", "message", "details"}}` (every admin route, the skill
 * surface) and RFC 9457 problem+json (`{"type", "title", "status", "detail", ...}`:
 * the verdict). {@link errorFromResponse} reads either into a {@link MockskillError}
 * carrying `status`, `code` and `message`, or into one of its subclasses where the
 * body says more (the problems of a scenario, the findings of a verdict).
 */

/** What a JSON body is, read without trusting it. */
export type Json = null | boolean | number | string | Json[] | { [key: string]: Json };

/** A position in a scenario or a verification request, as mockskill reports a load problem. */
export interface Problem {
  file?: string;
  line?: number;
  column?: number;
  path?: string;
  expected?: string;
  found?: string;
  hint?: string;
  message?: string;
  [key: string]: Json | undefined;
}

/** One finding of the audit, as the verdict lists it. */
export interface Finding {
  rule: string;
  message?: string;
  attempts?: Json[];
  expected?: Json;
  fix?: string;
  [key: string]: Json | undefined;
}

/** Any error mockskill answered: its HTTP status, its error code and its message. */
export class MockskillError extends Error {
  override name = "MockskillError";
  /** The HTTP status answered (0: no answer came, see {@link UnreachableError}). */
  readonly status: number;
  /** The error code: `MOCKSKILL_BAD_REQUEST`, `AUTH_REQUIRED`, a problem's type name, ... */
  readonly code: string;
  /** The unified body's `details`, or the problem's other members; `{}` when none. */
  readonly details: Record<string, Json>;
  /** The body as answered, for what the fields above do not hold. */
  readonly body: string;

  constructor(status: number, code: string, message: string, details: Record<string, Json> = {}, body = "") {
    super(message);
    this.status = status;
    this.code = code;
    this.details = details;
    this.body = body;
  }
}

/** No answer came: the server is not there (yet), or the connection failed. */
export class UnreachableError extends MockskillError {
  override name = "UnreachableError";
}

/** The admin token is missing or wrong (401 `MOCKSKILL_ADMIN_TOKEN_REQUIRED`). */
export class AdminAuthError extends MockskillError {
  override name = "AdminAuthError";
}

/** A scenario (or a verification request) mockskill could not read: each positioned problem. */
export class InvalidInputError extends MockskillError {
  override name = "InvalidInputError";
  get problems(): Problem[] {
    const problems = this.details["problems"];
    return Array.isArray(problems) ? (problems as Problem[]) : [];
  }
}

/** `verify` did not hold: the journal disagrees with the claim (409 `MOCKSKILL_VERIFICATION_FAILED`). */
export class VerificationError extends MockskillError {
  override name = "VerificationError";
  /** How many requests matched the claim. */
  get count(): number {
    const count = this.details["count"];
    return typeof count === "number" ? count : 0;
  }
}

/** An RFC 9457 problem (`application/problem+json`): its type URI, title and detail too. */
export class ProblemError extends MockskillError {
  override name = "ProblemError";
  /** The problem's type, a URI naming it (`code` is its last segment). */
  get type(): string {
    return stringOf(this.details["type"]) ?? "about:blank";
  }
  get title(): string {
    return stringOf(this.details["title"]) ?? "";
  }
}

/** The verdict said no (409): the session has findings, made no request, or is not covered as asked. */
export class VerdictError extends ProblemError {
  override name = "VerdictError";
  get session(): string {
    return stringOf(this.details["session"]) ?? "";
  }
  get findings(): Finding[] {
    const findings = this.details["findings"];
    return Array.isArray(findings) ? (findings as Finding[]) : [];
  }
  /** The required names (`require=`) the session did not cover. */
  get uncovered(): string[] {
    const uncovered = this.details["uncovered"];
    return Array.isArray(uncovered) ? uncovered.filter((n): n is string => typeof n === "string") : [];
  }
}

/** The verdict's session is one the journal has never seen (404), with close names. */
export class UnknownSessionError extends ProblemError {
  override name = "UnknownSessionError";
  get didYouMean(): string[] {
    const names = this.details["did_you_mean"];
    return Array.isArray(names) ? names.filter((n): n is string => typeof n === "string") : [];
  }
}

/**
 * The typed error for an answer that is not a success: read from its body, whichever of
 * mockskill's two shapes it has; `UNEXPECTED_RESPONSE` when it has neither (a proxy's page).
 */
export function errorFromResponse(status: number, contentType: string, body: string): MockskillError {
  let parsed: Json | undefined;
  try {
    parsed = JSON.parse(body) as Json;
  } catch {
    parsed = undefined;
  }
  if (isObject(parsed) && isObject(parsed["error"])) {
    return fromUnified(status, parsed["error"], body);
  }
  if (isObject(parsed) && (contentType.includes("problem+json") || typeof parsed["type"] === "string")) {
    return fromProblem(status, parsed, body);
  }
  const excerpt = body.length > 200 ? `${body.slice(0, 200)}...` : body;
  return new MockskillError(
    status,
    "UNEXPECTED_RESPONSE",
    `mockskill answered ${status} with a body that is no mockskill error (${contentType || "no type"}): ${excerpt}`,
    {},
    body,
  );
}

function fromUnified(status: number, error: { [key: string]: Json }, body: string): MockskillError {
  const code = stringOf(error["code"]) ?? "UNKNOWN";
  const message = stringOf(error["message"]) ?? `mockskill answered ${status} ${code}`;
  const details = isObject(error["details"]) ? error["details"] : {};
  // The skill surface's AUTH_REQUIRED is the consumer's business, not the admin client's.
  if (code.startsWith("MOCKSKILL_ADMIN_TOKEN")) {
    return new AdminAuthError(status, code, message, details, body);
  }
  if (code === "MOCKSKILL_VERIFICATION_FAILED") {
    return new VerificationError(status, code, message, details, body);
  }
  if (Array.isArray(details["problems"])) {
    return new InvalidInputError(status, code, message, details, body);
  }
  return new MockskillError(status, code, message, details, body);
}

function fromProblem(status: number, problem: { [key: string]: Json }, body: string): MockskillError {
  const type = stringOf(problem["type"]) ?? "about:blank";
  // The type URI's last segment names the problem (`.../problems/not-clean` → `not-clean`).
  const code = stringOf(problem["code"]) ?? (type.split("/").filter(Boolean).pop() || "about:blank");
  const message =
    stringOf(problem["detail"]) ?? stringOf(problem["title"]) ?? `mockskill answered ${status} ${type}`;
  const answered = typeof problem["status"] === "number" ? problem["status"] : status;
  if (answered === 404 && "did_you_mean" in problem) {
    return new UnknownSessionError(answered, code, message, problem, body);
  }
  if (answered === 409 && ("findings" in problem || "uncovered" in problem)) {
    return new VerdictError(answered, code, message, problem, body);
  }
  return new ProblemError(answered, code, message, problem, body);
}

function isObject(value: Json | undefined): value is { [key: string]: Json } {
  return typeof value === "object" && value !== null && !Array.isArray(value);
}

function stringOf(value: Json | undefined): string | undefined {
  return typeof value === "string" ? value : undefined;
}
