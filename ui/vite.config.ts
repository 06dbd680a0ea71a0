import { defineConfig } from "vitest/config";

// React without a plugin: esbuild/oxc compile TSX with the automatic runtime.
export default defineConfig({
  clearScreen: false,
  server: { port: 1420, strictPort: true },
  build: { outDir: "dist", target: "es2022", sourcemap: false },
  test: { include: ["src/**/*.test.ts"], environment: "node" },
});
