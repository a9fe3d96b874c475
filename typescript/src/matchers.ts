/**
 * Matchers for Vitest and Jest: `await expect(session).toBeClean()` and
 * `await expect(session).toHaveVerified({ skill: "quote" })`.
 *
 * Plain matcher functions, as both runners' `expect.extend` takes them (neither runner is
 * imported: the package has no runtime dependency). They are asynchronous, since each
 * asks the server, so a test awaits them. Register once, in a setup file:
 *
 *     import { expect } from "vitest";          // or Jest's global expect
 *     import { mockskillMatchers } from "mockskill";
 *     expect.extend(mockskillMatchers);
 */
import type { Session, VerdictOptions, VerifyClaim } from "./client.js";
import { MockskillError, UnknownSessionError, VerdictError, VerificationError } from "./errors.js";

/** What a matcher answers, in both runners. */
export interface MatcherResult {
  pass: boolean;
  message: () => string;
}

/** The part of the runners' matcher context these matchers read (`.not` flips the message). */
export interface MatcherContext {
  isNot?: boolean;
}

/**
 * The matchers' types, for a runner's declaration merging:
 *
 *     declare module "vitest" { interface Assertion<T> extends MockskillMatchers<T> {} }
 *     declare global { namespace jest { interface Matchers<R> extends MockskillMatchers<R> {} } }
 */
export interface MockskillMatchers<R = unknown> {
  /** The session made requests, drew no finding of the audit, and covers what *require* names. */
  toBeClean(options?: VerdictOptions): Promise<R>;
  /** The session sent the requests *claim* names, as many as it says (`POST /__admin/verify`). */
  toHaveVerified(claim?: Omit<VerifyClaim, "session">): Promise<R>;
}

export const mockskillMatchers = {
  async toBeClean(this: MatcherContext, received: unknown, options: VerdictOptions = {}): Promise<MatcherResult> {
    const session = asSession(received, "toBeClean");
    try {
      const verdict = await session.verdict(options);
      return {
        pass: true,
        message: () =>
          `expected session '${session.name}' not to be clean, but it is: ${verdict.requests} requests, no finding`,
      };
    } catch (error) {
      if (error instanceof VerdictError) {
        return { pass: false, message: () => verdictMessage(session.name, error) };
      }
      if (error instanceof UnknownSessionError) {
        return { pass: false, message: () => error.message };
      }
      throw error;
    }
  },

  async toHaveVerified(
    this: MatcherContext,
    received: unknown,
    claim: Omit<VerifyClaim, "session"> = {},
  ): Promise<MatcherResult> {
    const session = asSession(received, "toHaveVerified");
    try {
      const verification = await session.verify(claim);
      return {
        pass: true,
        message: () =>
          `expected session '${session.name}' not to have sent ${verification.requests} (${verification.expected}), but it sent ${verification.count}`,
      };
    } catch (error) {
      if (error instanceof VerificationError) {
        return { pass: false, message: () => error.message };
      }
      throw error;
    }
  },
};

function asSession(received: unknown, matcher: string): Session {
  if (
    typeof received === "object" &&
    received !== null &&
    "name" in received &&
    "verdict" in received &&
    "verify" in received
  ) {
    return received as Session;
  }
  throw new MockskillError(
    0,
    "NOT_A_SESSION",
    `${matcher}() expects a mockskill Session (client.session(NAME)), got ${describe(received)}`,
  );
}

function describe(value: unknown): string {
  if (value === null) return "null";
  if (typeof value === "string") return `the string ${JSON.stringify(value)}: pass client.session(${JSON.stringify(value)})`;
  return typeof value;
}

function verdictMessage(session: string, error: VerdictError): string {
  const lines = [`expected session '${session}' to be clean: ${error.message}`];
  for (const finding of error.findings) {
    lines.push(`  ${finding.rule}: ${finding.message ?? ""}${finding.fix ? `\n    fix: ${finding.fix}` : ""}`);
  }
  if (error.uncovered.length > 0) lines.push(`  not covered: ${error.uncovered.join(", ")}`);
  return lines.join("\n");
}
