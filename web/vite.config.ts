// Vite builds the explorer into web/dist, which `headscope serve` serves (HEADSCOPE_WEB_DIST).
// `npm run dev` serves the sources with hot reload and forwards /api to a running
// `headscope serve --port 8080`. The server refuses a foreign Host or Origin (docs/api.md, "Who may
// call the API"), so the proxy presents itself as 127.0.0.1:8080 and replaces the page's Origin
// (localhost:5173) with the server's own: the dev server is itself a loopback-only tool.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: './',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 1024 },
  server: {
    proxy: {
      '/api': {
        target: 'http://127.0.0.1:8080',
        changeOrigin: true,
        headers: { origin: 'http://127.0.0.1:8080' },
      },
    },
  },
  test: { include: ['src/**/*.test.ts'], environment: 'node' },
});
