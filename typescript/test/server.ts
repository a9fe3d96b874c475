/**
 * A real `mockskill serve` for the tests: started from the repository's Python
 * (MOCKSKILL_PYTHON, else ../.venv/bin/python) on a free port, stopped after; or, where
 * MOCKSKILL_URL names a running one (tests/test_typescript_package.py starts one for
 * all the files), that one, for the tests that need no option of their own. Each test
 * has sessions and scenario names of its own, so they share a server safely.
 */
import { type ChildProcess, spawn } from "node:child_process";
import { once } from "node:events";
import { existsSync } from "node:fs";
import { fileURLToPath } from "node:url";

const REPO = fileURLToPath(new URL("../../..", import.meta.url)); // dist/test/ → the repository
const VENV_PYTHON = `${REPO}.venv/bin/python`;
export const PYTHON = process.env["MOCKSKILL_PYTHON"] ?? (existsSync(VENV_PYTHON) ? VENV_PYTHON : "python3");

export interface Served {
  url: string;
  output: () => string;
  stop: () => Promise<void>;
}

const SHARED = process.env["MOCKSKILL_URL"];

/** Starts `mockskill serve --port 0 ARGS` and resolves once its banner names the URL. */
export async function serve(...args: string[]): Promise<Served> {
  if (SHARED && args.length === 0) return { url: SHARED, output: () => "", stop: async () => undefined };
  const child: ChildProcess = spawn(PYTHON, ["-m", "mockskill", "serve", "--port", "0", "--quiet", ...args], {
    cwd: REPO,
    stdio: ["ignore", "pipe", "pipe"],
  });
  let output = "";
  const url = await new Promise<string>((resolve, reject) => {
    const timer = setTimeout(() => reject(new Error(`mockskill serve printed no banner in 30 s:\n${output}`)), 30_000);
    const read = (chunk: Buffer): void => {
      output += chunk.toString();
      const match = / at (https?:\/\/[^\s]+)/.exec(output);
      if (match?.[1] !== undefined) {
        clearTimeout(timer);
        resolve(match[1]);
      }
    };
    child.stdout?.on("data", read);
    child.stderr?.on("data", read);
    child.on("exit", (code) => {
      clearTimeout(timer);
      reject(new Error(`mockskill serve exited ${code}:\n${output}`));
    });
  });
  return {
    url,
    output: () => output,
    stop: async () => {
      if (child.exitCode !== null) return;
      const exited = once(child, "exit");
      child.kill("SIGTERM");
      await exited;
    },
  };
}

/** A session name no other test (or run) uses. */
export function sessionName(label: string): string {
  return `ts-${label}-${process.pid}-${Math.random().toString(36).slice(2, 8)}`;
}
