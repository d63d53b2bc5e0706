import { defineConfig } from "vite";

// The page is built into dist/ and embedded in claudectl (web/embed.go).
// Preact through esbuild's automatic JSX runtime: no plugin needed.
export default defineConfig({
  esbuild: { jsx: "automatic", jsxImportSource: "preact" },
  build: { outDir: "dist", emptyOutDir: true, assetsDir: "assets", sourcemap: false, modulePreload: { polyfill: false } },
  test: { include: ["src/**/*.test.ts"] },
});
