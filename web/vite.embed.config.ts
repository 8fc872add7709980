// Builds the embedded explorer (src/embed.ts) into ONE self-contained script for the Python
// package: python/headscope/_web/headscope-embed.js (a build output, not committed; `make
// web-embed` or `npm run build:embed` writes it). The stylesheets the views import are put into
// the script, which adds them to the page as a <style> element, so a notebook cell or a saved HTML
// file needs nothing else: no CDN, no network.
import { defineConfig, type Plugin } from 'vite';

/** Moves the CSS Vite extracted into the script itself. */
function cssIntoScript(): Plugin {
  return {
    name: 'headscope-css-into-script',
    apply: 'build',
    enforce: 'post',
    generateBundle(_options, bundle) {
      let css = '';
      for (const [name, file] of Object.entries(bundle))
        if (file.type === 'asset' && name.endsWith('.css')) {
          css += String(file.source);
          delete bundle[name];
        }
      for (const file of Object.values(bundle))
        if (file.type === 'chunk' && file.isEntry)
          file.code = `(function(){var s=document.createElement("style");s.textContent=${JSON.stringify(css)};document.head.appendChild(s)})();\n${file.code}`;
    },
  };
}

export default defineConfig({
  plugins: [cssIntoScript()],
  build: {
    outDir: '../python/headscope/_web',
    emptyOutDir: true,
    target: 'es2022',
    lib: { entry: 'src/embed.ts', formats: ['iife'], name: 'headscopeEmbed', fileName: () => 'headscope-embed.js' },
    cssCodeSplit: false,
  },
});
