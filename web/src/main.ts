// Entry point: apply the theme, read the model's description from the server, start the app.
import './styles.css';
import { ApiClient } from './lib/api';
import { applyTheme } from './lib/theme';
import { App } from './app';

async function main(): Promise<void> {
  applyTheme(document.documentElement);
  const root = document.getElementById('app')!;
  const api = new ApiClient();
  try {
    // A server serving several models (serve --model A --model B) lists them; the page is about
    // the first, and "Compare models" reads the others. A server without the list serves one.
    const [model, served] = await Promise.all([api.model(), api.models().catch(() => null)]);
    new App(root, api, model, served ? served.map((s) => s.model) : [model]).mount();
  } catch (e) {
    root.innerHTML = '';
    const p = document.createElement('p');
    p.className = 'fatal';
    p.textContent = `The explorer could not reach its server (${(e as Error).message}). Start it with: headscope serve --model <dir>`;
    root.appendChild(p);
  }
}

void main();
