// The Jest test runs as tsc compiles it (dist/), as native ES modules: no transform.
export default {
  testEnvironment: "node",
  testMatch: ["<rootDir>/dist/runners/jest/**/*.test.js"],
  transform: {},
};
