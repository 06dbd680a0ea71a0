import js from "@eslint/js";
import reactHooks from "eslint-plugin-react-hooks";
import globals from "globals";
import tseslint from "typescript-eslint";

export default tseslint.config(
  { ignores: ["dist", "node_modules", "test-results", "playwright-report", "tests/screenshots"] },
  js.configs.recommended,
  ...tseslint.configs.recommended,
  {
    files: ["**/*.{ts,tsx}"],
    languageOptions: { globals: { ...globals.browser, ...globals.node } },
    plugins: { "react-hooks": reactHooks },
    rules: {
      ...reactHooks.configs.recommended.rules,
      "react-hooks/set-state-in-effect": "off",
      // Only src/ipc.ts may call the Rust side.
      "no-restricted-imports": ["error", { paths: [{ name: "@tauri-apps/api/core", message: "use the typed wrappers in src/ipc.ts" }] }],
    },
  },
  { files: ["src/ipc.ts"], rules: { "no-restricted-imports": "off" } },
  { files: ["tests/e2e/mock-backend.js"], languageOptions: { globals: globals.browser } },
);
