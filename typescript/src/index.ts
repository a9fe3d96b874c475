/**
 * mockskill for TypeScript: an admin client, typed errors and matchers for Vitest and Jest.
 * The Testcontainers helper is its own entry, `mockskill/container` (testcontainers is an
 * optional peer dependency).
 */
export {
  type ClientOptions,
  type Health,
  type JournalEntry,
  type JournalFilter,
  type LoadOptions,
  MockskillClient,
  type Report,
  type ReportOptions,
  type ReportSession,
  type SentRequest,
  SESSION_HEADER,
  Session,
  type Verdict,
  type VerdictOptions,
  type Verification,
  type VerifyClaim,
  type WaitOptions,
} from "./client.js";
export {
  AdminAuthError,
  errorFromResponse,
  type Finding,
  InvalidInputError,
  type Json,
  MockskillError,
  ProblemError,
  type Problem,
  UnknownSessionError,
  UnreachableError,
  VerdictError,
  VerificationError,
} from "./errors.js";
export { type MatcherContext, type MatcherResult, type MockskillMatchers, mockskillMatchers } from "./matchers.js";
export { type Answer, fetchTransport, httpsTransport, type Outgoing, type Transport } from "./transport.js";
