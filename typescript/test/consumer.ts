/**
 * The consumers under test: one that retries as the protocol asks, one that does not
 * (it retries at once, and retries what must not be retried).
 */
import type { Session } from "mockskill";

/** The skills the consumers are tested against, under names of the test file's own. */
export interface Skills {
  /** The scenario: `quote` unreachable twice (20 ms advice), then a price; `locked` AUTH_REQUIRED. */
  text: string;
  quote: string;
  locked: string;
}

export function scenario(name: string): Skills {
  const quote = `${name}-quote`;
  const locked = `${name}-locked`;
  const text = `
name: ${name}
skills:
  - id: ${quote}
    invoke:
      - error: ENDPOINT_UNREACHABLE
        retry: {suggested_delay_ms: 20, max_attempts: 4}
        times: 2
      - json: {price: 42, currency: EUR}
  - id: ${locked}
    invoke: {error: AUTH_REQUIRED}
`;
  return { text, quote, locked };
}

interface Reply {
  status: number;
  body: { error?: { retry?: { suggested_delay_ms: number; max_attempts: number } } } & Record<string, unknown>;
}

async function send(url: string, session: Session, skill: string, input: unknown): Promise<Reply> {
  const reply = await fetch(`${url}/skills/${skill}/invoke`, {
    method: "POST",
    headers: { "Content-Type": "application/json", "Skill-Protocol-Version": "1.0.0", ...session.headers },
    body: JSON.stringify(input),
  });
  return { status: reply.status, body: (await reply.json()) as Reply["body"] };
}

/** Retries retryable errors with the protocol's backoff, never sooner than advised. */
export async function politeInvoke(url: string, session: Session, skill: string, input: unknown): Promise<Reply> {
  for (let attempt = 1; ; attempt++) {
    const reply = await send(url, session, skill, input);
    const retry = reply.body.error?.retry;
    if (reply.status < 400 || !retry || attempt >= retry.max_attempts) return reply;
    await new Promise((resolve) => setTimeout(resolve, retry.suggested_delay_ms * 2 ** (attempt - 1)));
  }
}

/** Sends *times* requests back to back, the same each time, whatever the answers say. */
export async function hastyInvoke(url: string, session: Session, skill: string, times: number): Promise<Reply[]> {
  const replies = [];
  for (let i = 0; i < times; i++) replies.push(await send(url, session, skill, { item: "book" }));
  return replies;
}
