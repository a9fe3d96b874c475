/**
 * The matchers' types for Vitest: `expect(session).toBeClean()` type-checks once this is
 * referenced (`/// <reference types="mockskill/vitest" />` in a setup or test file, or
 * `"types": ["mockskill/vitest"]` in tsconfig.json). Types only: register the matchers
 * with `expect.extend(mockskillMatchers)`.
 */
import type { MockskillMatchers } from "mockskill";

declare module "vitest" {
  // Vitest's own declaration is `Assertion<T = any>`: a merge must repeat it.
  // eslint-disable-next-line @typescript-eslint/no-explicit-any
  interface Assertion<T = any> extends MockskillMatchers<T> {}
}
