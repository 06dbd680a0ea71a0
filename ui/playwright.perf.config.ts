import base from "./playwright.config";
import { defineConfig } from "@playwright/test";

// The frame-time benchmark: the same browser and preview server as the
// end-to-end tests, its own folder and no time limit beyond the run's own.
export default defineConfig({ ...base, testDir: "tests/perf", testMatch: "*.perf.ts", timeout: 0 });
