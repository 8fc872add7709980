// Browser check of the embedded explorer (python/headscope/views.py pages: notebook outputs and
// save_html files) in Debian's Chromium, offline. Run by tests/python/test_views.py:
//   node e2e/embed.mjs CHECKS.json
// CHECKS.json: [{file, frame, head, canvas?, q?, k?, expected?, n?, shot}]: open `file` (when
// `frame`, the page is a notebook output whose explorer is inside an iframe), wait until it has
// drawn, then count the inked pixels of `canvas` (a selector; default: the layer view's tile of
// `head`, a T × T canvas, T = n) and, given q, hover cell (q, k) and read the value the tooltip
// shows (4 decimals), for the caller to compare with `expected`. A screenshot goes to `shot`. Any
// request that leaves the page (network) is recorded as an error. Prints one JSON result.
import fs from 'node:fs';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

const checks = JSON.parse(fs.readFileSync(process.argv[2], 'utf8'));
const browser = await chromium.launch({
  executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
  args: CHROMIUM_ARGS,
});
const results = [];
try {
  for (const c of checks) {
    const context = await browser.newContext({ viewport: { width: 1300, height: 900 }, deviceScaleFactor: 1 });
    const page = await context.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    page.on('console', (m) => m.type() === 'error' && errors.push(m.text()));
    await context.route(/^(https?|wss?):/, (route) => {
      errors.push(`network request ${route.request().url()}`);
      return route.abort();
    });
    await page.goto('file://' + c.file);
    const frame = c.frame
      ? await (await page.waitForSelector('iframe.headscope-view')).contentFrame()
      : page.mainFrame();
    await frame.waitForSelector('body[data-ready]', { timeout: 15000 });
    const ready = await frame.getAttribute('body', 'data-ready');
    const canvas = await frame.waitForSelector(c.canvas ?? `.head-tile[data-head="${c.head}"] canvas`, {
      timeout: 5000,
    });
    await canvas.scrollIntoViewIfNeeded();
    // Pixels that are not the page's background: a drawn heatmap has many.
    const inked = await canvas.evaluate((el) => {
      const d = el.getContext('2d').getImageData(0, 0, el.width, el.height).data;
      let n = 0;
      for (let i = 0; i < d.length; i += 4) if (d[i + 3] > 0 && (d[i] < 245 || d[i + 1] < 245 || d[i + 2] < 245)) n++;
      return { inked: n, total: d.length / 4 };
    });
    let tooltip = '';
    if (c.q !== undefined) {
      const box = await canvas.boundingBox();
      await page.mouse.move(box.x + ((c.k + 0.5) * box.width) / c.n, box.y + ((c.q + 0.5) * box.height) / c.n);
      const tip = await frame.waitForSelector('.tooltip', { state: 'visible', timeout: 5000 });
      tooltip = (await tip.textContent()) ?? '';
    }
    await page.screenshot({ path: c.shot, fullPage: true });
    const shown = tooltip.match(/(\d+\.\d{4})(?!.*\d+\.\d{4})/)?.[1] ?? null;
    results.push({ file: c.file, ready, ...inked, tooltip, shown, expected: c.expected, errors });
    await context.close();
  }
} finally {
  await browser.close();
}
console.log(JSON.stringify(results));
