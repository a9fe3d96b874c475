/**
 * The matchers' types for Jest: `expect(session).toBeClean()` type-checks once this is
 * referenced (`/// <reference types="mockskill/jest" />` in a setup or test file, or
 * `"types": ["mockskill/jest"]` in tsconfig.json), both for `expect` from `@jest/globals`
 * (the `expect` package's `Matchers`) and for the global one of `@types/jest` (the `jest`
 * namespace's). Types only: register the matchers with `expect.extend(mockskillMatchers)`.
 */
import type { MockskillMatchers } from "mockskill";

declare module "expect" {
  interface Matchers<R extends void | Promise<void>, T = unknown> extends MockskillMatchers<R> {}
}

declare global {
  // eslint-disable-next-line @typescript-eslint/no-namespace
  namespace jest {
    interface Matchers<R, T = {}> extends MockskillMatchers<R> {}
  }
}
