/**
 * How the admin client sends a request: Node's `fetch` by default; `node:https` when the
 * server's certificate comes from a CA the caller hands over (mockskill's `--tls` makes
 * one at start, and Node 20's `fetch` takes no CA per request).
 */
import { request as httpsRequest } from "node:https";

/** One answer, read whole: what the client needs of it. */
export interface Answer {
  status: number;
  contentType: string;
  body: string;
}

/** One request: method, URL, headers and an optional text body. */
export interface Outgoing {
  method: string;
  url: string;
  headers: Record<string, string>;
  body?: string;
  timeoutMs: number;
}

/** Sends one request and reads its answer whole; rejects when no answer came. */
export type Transport = (outgoing: Outgoing) => Promise<Answer>;

/** The default: the platform's `fetch` (or one given: a test double, undici's with a dispatcher). */
export function fetchTransport(fetchImpl: typeof fetch = fetch): Transport {
  return async ({ method, url, headers, body, timeoutMs }) => {
    const response = await fetchImpl(url, {
      method,
      headers,
      ...(body === undefined ? {} : { body }),
      signal: AbortSignal.timeout(timeoutMs),
    });
    return {
      status: response.status,
      contentType: response.headers.get("content-type") ?? "",
      body: await response.text(),
    };
  };
}

/**
 * HTTPS that trusts *ca* (PEM), or nothing at all when *ca* is `"insecure"`: a health
 * probe that asks whether the server answers, not who it is (as the image's own check does).
 */
export function httpsTransport(ca: string | "insecure"): Transport {
  return ({ method, url, headers, body, timeoutMs }) =>
    new Promise<Answer>((resolve, reject) => {
      const outgoing = httpsRequest(
        url,
        {
          method,
          headers,
          timeout: timeoutMs,
          ...(ca === "insecure" ? { rejectUnauthorized: false } : { ca }),
        },
        (incoming) => {
          const chunks: Buffer[] = [];
          incoming.on("data", (chunk: Buffer) => chunks.push(chunk));
          incoming.on("end", () =>
            resolve({
              status: incoming.statusCode ?? 0,
              contentType: String(incoming.headers["content-type"] ?? ""),
              body: Buffer.concat(chunks).toString("utf8"),
            }),
          );
          incoming.on("error", reject);
        },
      );
      outgoing.on("timeout", () => outgoing.destroy(new Error(`no answer within ${timeoutMs} ms`)));
      outgoing.on("error", reject);
      outgoing.end(body);
    });
}
