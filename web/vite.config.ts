// Vite builds the explorer into web/dist, which `headscope serve` serves (HEADSCOPE_WEB_DIST).
// `npm run dev` serves the sources with hot reload and forwards /api to a running
// `headscope serve --port 8080`.
import { defineConfig } from 'vitest/config';

export default defineConfig({
  base: './',
  build: { outDir: 'dist', emptyOutDir: true, target: 'es2022', chunkSizeWarningLimit: 1024 },
  server: { proxy: { '/api': 'http://127.0.0.1:8080' } },
  test: { include: ['src/**/*.test.ts'], environment: 'node' },
});
