// A long text in the explorer: 8,192 tokens on SmolLM2 (its position limit), built from the
// `# text =` lines of the UD English EWT dev treebank and truncated by the server. The run's maps
// are streamed, so the explorer draws pooled overviews and zooms into exact tiles: this suite
// zooms (buttons, wheel, a dragged rectangle), pans, compares a hovered weight with the tile the
// test fetches itself, and prints the timings (switching head, a zoomed tile). The views that
// work from overviews and tiles keep working: the model overview (every layer's overview), Head
// lines (a window of exact weights, checked against /api/tile) and Compare heads (block by
// block, its distance checked against /api/overview).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import http from 'node:http';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';
import { decodeTensor } from './harness.mjs';

export const LONG_TOKENS = 8192;

/** Sentences of the treebank, joined, up to `maxBytes` bytes (over 8,192 SmolLM2 tokens). */
export function longText(conllu, maxBytes = 46000) {
  let text = '';
  for (const line of fs.readFileSync(conllu, 'utf8').split('\n')) {
    if (!line.startsWith('# text = ')) continue;
    const s = line.slice('# text = '.length).trim();
    if (Buffer.byteLength(text + ' ' + s) > maxBytes) break;
    text = text ? `${text} ${s}` : s;
  }
  return text;
}

/** POST without a client-side time limit (the first 8K analysis takes minutes on two cores). */
function post(base, pathName, body) {
  return new Promise((resolve, reject) => {
    const data = Buffer.from(JSON.stringify(body));
    const req = http.request(
      base + pathName,
      { method: 'POST', headers: { 'Content-Type': 'application/json', 'Content-Length': data.length, Origin: base } },
      (res) => {
        const chunks = [];
        res.on('data', (c) => chunks.push(c));
        res.on('end', () => {
          const buf = Buffer.concat(chunks);
          const json = (res.headers['content-type'] ?? '').includes('json');
          resolve({ status: res.statusCode, body: json ? JSON.parse(buf.toString('utf8')) : buf });
        });
      },
    );
    req.on('error', reject);
    req.end(data);
  });
}

export async function longTests(base, suite, outDir, text, timings) {
  let run = null;
  await suite.test('the text is over the token limit and under the byte limit (64 KiB)', async () => {
    // Without truncation the server only tokenises the text and says how long it is.
    const r = await post(base, '/api/run', { text });
    assert.equal(r.status, 413);
    const n = Number(/text is (\d+) tokens/.exec(r.body.error.message)?.[1]);
    const bytes = Buffer.byteLength(text);
    assert.ok(n > LONG_TOKENS, `${n} tokens`);
    assert.ok(bytes <= 64 * 1024);
    timings.bytes_per_token = bytes / n;
    console.log(
      `    ${bytes} bytes = ${n} tokens (${(bytes / n).toFixed(2)} bytes a token: ${LONG_TOKENS} tokens ≈ ${((LONG_TOKENS * bytes) / n / 1024).toFixed(1)} KiB)`,
    );
  });

  await suite.test(`the ${LONG_TOKENS}-token analysis (once, reused by every step)`, async () => {
    const t0 = Date.now();
    const r = await post(base, '/api/run', { text, truncate: true, level: 'token', special: 'keep' });
    timings.analysis_s = (Date.now() - t0) / 1000;
    assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 400));
    run = r.body;
    assert.equal(run.n_tokens, LONG_TOKENS);
    assert.equal(run.truncated, true);
    assert.equal(run.streamed, true);
    assert.ok(run.overview.cells > 0 && run.overview.cells <= 512);
    assert.equal(run.overview.starts.length, run.overview.cells + 1);
    console.log(`    analysis of ${run.n_tokens} tokens: ${timings.analysis_s.toFixed(1)} s`);
  });
  if (!run) return;
  const T = run.n_tokens;

  await suite.test('API: full maps refused with 422, bad tiles 4xx, a tile and an overview answer', async () => {
    const att = await post(base, '/api/attention', { text, truncate: true, layer: 0 });
    assert.equal(att.status, 422);
    assert.equal(att.body.error.code, 'streamed');
    assert.match(att.body.error.message, /\/api\/tile/);
    for (const [q0, q1, k0, k1, status] of [
      [0, T + 1, 0, 4, 400],
      [10, 5, 0, 4, 400],
      [0, 4, 7, 7, 400],
      [0, 2048, 0, 1024, 413],
    ]) {
      const r = await post(base, '/api/tile', { text, truncate: true, layer: 0, head: 0, q0, q1, k0, k1 });
      assert.equal(r.status, status, `${q0}..${q1} × ${k0}..${k1}: ${JSON.stringify(r.body)}`);
    }
    const t0 = Date.now();
    const tile = await post(base, '/api/tile', {
      text,
      truncate: true,
      layer: 5,
      head: 3,
      q0: T - 1024,
      q1: T,
      k0: T - 1024,
      k1: T,
    });
    timings.api_tile_1024_ms = Date.now() - t0;
    assert.equal(tile.status, 200);
    const t = decodeTensor(tile.body);
    assert.deepEqual(t.shape, [1024, 1024]);
    let row = 0;
    for (let k = 0; k < 1024; k++) row += t.data[1023 * 1024 + k]; // the last query sees every key of the tile and more
    assert.ok(row > 0 && row <= 1 + 1e-5);
    const ov = await post(base, '/api/overview', { text, truncate: true, layer: 5 });
    assert.equal(ov.status, 200);
    assert.deepEqual(decodeTensor(ov.body).shape, [9, 2, run.overview.cells, run.overview.cells]);
    console.log(`    /api/tile 1024 × 1024 at the end of the text: ${timings.api_tile_1024_ms} ms`);
  });

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const page = await browser.newPage({ viewport: { width: 1400, height: 1300 } });
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const shot = (name) => page.screenshot({ path: path.join(outDir, name), fullPage: false });
  const mapState = () =>
    page.$eval('#zoom-map', (c) => ({
      state: c.dataset.state,
      region: c.dataset.region,
      ms: c.dataset.tileMs,
      inputMs: c.dataset.inputToTileMs,
    }));
  const waitState = (state, region) =>
    page.waitForFunction(
      ([s, r]) => {
        const c = document.querySelector('#zoom-map');
        return c && c.dataset.state === s && (r === null || c.dataset.region === r);
      },
      [state, region ?? null],
      { timeout: 60000 },
    );
  /** The map's box with all of it on screen (mouse events outside the viewport reach nothing). */
  const mapBox = async () => {
    await page.$eval('#zoom-map', (c) => c.scrollIntoView({ block: 'center' }));
    return page.locator('#zoom-map').boundingBox();
  };
  /** Milliseconds from `action` until the map holds the exact tile of the new region, as the test
   * sees it (with Playwright's round trips and polling); the page's own measure, from the input
   * event to the painted frame, goes to timings.input_to_tile_ms. */
  async function timeTile(action) {
    const before = (await mapState()).region;
    const t0 = Date.now();
    await action();
    try {
      await page.waitForFunction(
        (b) => {
          const c = document.querySelector('#zoom-map');
          return c.dataset.state === 'tile' && c.dataset.region !== b;
        },
        before,
        { timeout: 30000 },
      );
    } catch (e) {
      throw new Error(
        `no tile for a new region (before ${before}, now ${JSON.stringify(await mapState())}): ${e.message}`,
        { cause: e },
      );
    }
    const ms = Date.now() - t0;
    const inputMs = Number((await mapState()).inputMs);
    assert.ok(inputMs > 0 && inputMs <= ms + 1, `input to painted tile ${inputMs} ms, the test saw ${ms} ms`);
    (timings.input_to_tile_ms ??= []).push(inputMs);
    return ms;
  }

  /** POST /api/tile of layer 5's head `head` over region [q0, q1, k0, k1] of the long text. */
  const layer5Tile = (head, [q0, q1, k0, k1], view = 'weights') =>
    post(base, '/api/tile', { text, truncate: true, layer: 5, head, q0, q1, k0, k1, view });

  /** Runs `action` (the Norm-weighted button) and waits until the map holds the exact tile of the
   *  same region in `view`. */
  async function timeTileView(action, view) {
    await action();
    await page.waitForFunction(
      (v) => {
        const c = document.querySelector('#zoom-map');
        return c.dataset.state === 'tile' && (c.dataset.view ?? 'weights') === v;
      },
      view,
      { timeout: 30000 },
    );
  }

  try {
    await suite.test('the explorer opens the long text: pooled layer grid and zoomable head map', async () => {
      // Typed, not put in the URL: a 46 KB text does not fit in a request line (the app leaves
      // such a text out of the URL it writes).
      await page.goto(`${base}/?layer=5&head=0`);
      await page.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 120000 });
      await page.fill('#text-input', text);
      const before = await page.getAttribute('body', 'data-ready');
      await page.press('#text-input', 'Enter');
      await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, { timeout: 120000 });
      assert.equal(
        await page.getAttribute('body', 'data-ready').then((v) => v.startsWith('error')),
        false,
        await page.textContent('.text-meta'),
      );
      assert.equal(new URL(page.url()).searchParams.get('text'), null);
      assert.match(await page.textContent('.text-meta'), /8192 tokens .* only the beginning analysed/);
      assert.equal(await page.$$eval('#head-grid canvas', (els) => els.length), 9);
      assert.equal(await page.isVisible('#layer-long-note'), true);
      assert.equal(await page.isVisible('#zoom-map'), true);
      assert.equal(await page.isVisible('.labeled-heatmap'), false);
      const s = await mapState();
      assert.equal(s.state, 'overview');
      assert.equal(s.region, `0,${T},0,${T}`);
      assert.match(await page.textContent('#strip-rows'), /Queries 0–8191/);
      await page.locator('#head-panel').screenshot({ path: path.join(outDir, 'long-head-overview.png') });
      await page.locator('#views').screenshot({ path: path.join(outDir, 'long-layer-grid.png') });
    });

    await suite.test('switching head redraws from the cached overview (timed)', async () => {
      await page.evaluate(() => document.activeElement?.blur());
      const times = [];
      for (let i = 0; i < 4; i++) {
        const before = await page.getAttribute('body', 'data-ready');
        const t0 = Date.now();
        await page.keyboard.press('ArrowRight');
        await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, { timeout: 60000 });
        times.push(Date.now() - t0);
      }
      timings.switch_head_ms = times;
      console.log(`    switching head: ${times.join(', ')} ms (target ≤ 300 ms)`);
      assert.equal(new URL(page.url()).searchParams.get('head'), '4');
      assert.ok(Math.min(...times) <= 1000, `switching head took ${times.join(', ')} ms`);
    });

    await suite.test('zoom in with the buttons until the exact tile comes (timed)', async () => {
      await page.click('#zoom-in');
      await page.click('#zoom-in');
      const ms = await timeTile(() => page.click('#zoom-in'));
      const s = await mapState();
      // Three halvings around the centre: 1,024 × 1,024 tokens, the largest tile allowed.
      assert.equal(s.region, '3584,4608,3584,4608');
      timings.zoomed_tile_ms = [ms];
      timings.zoomed_tile_fetch_ms = [Number(s.ms)];
      assert.match(await page.textContent('#zoom-status'), /exact weights \(1024 × 1024\)/);
      assert.match(await page.textContent('#strip-rows'), /Queries 3584–4607/);
      assert.equal(await page.getAttribute('#strip-keys', 'data-first'), '3584');
      await page.locator('#head-panel').screenshot({ path: path.join(outDir, 'long-head-tile.png') });
    });

    await suite.test('hover shows the exact weight, equal to the tile the test fetches', async () => {
      const box = await mapBox();
      const r = (await mapState()).region.split(',').map(Number);
      const head = Number(new URL(page.url()).searchParams.get('head'));
      for (const [fy, fx] of [
        [0.52, 0.49],
        [0.8, 0.3],
        [0.35, 0.34],
      ]) {
        await page.mouse.move(box.x + fx * box.width, box.y + fy * box.height);
        await page.waitForFunction(() => document.querySelector('.tooltip')?.style.display === 'block');
        const [q, k] = (await page.getAttribute('#zoom-map', 'data-hover')).split(',').map(Number);
        assert.ok(q >= r[0] && q < r[1] && k >= r[2] && k < r[3]);
        const tip = await page.textContent('.tooltip');
        const m = /weight (\d\.\d{4}) \(exact\)/.exec(tip);
        assert.ok(m, `tooltip: ${tip}`);
        const one = await layer5Tile(head, [q, q + 1, k, k + 1]);
        const whole = await layer5Tile(head, r);
        const v1 = decodeTensor(one.body).data[0];
        const v2 = decodeTensor(whole.body).data[(q - r[0]) * (r[3] - r[2]) + (k - r[2])];
        assert.ok(Math.abs(v1 - v2) <= 1e-6, `1×1 tile ${v1}, region tile ${v2}`);
        assert.equal(m[1], v2.toFixed(4), `hover (${q}, ${k}) shows ${m[1]}, the tile holds ${v2}`);
      }
      await shot('long-hover.png');
      await page.mouse.move(5, 5);
    });

    await suite.test(
      'Norm-weighted: the exact tile as norm-weighted shares, equal to /api/tile "view": "norm"',
      async () => {
        const r = (await mapState()).region.split(',').map(Number);
        const head = Number(new URL(page.url()).searchParams.get('head'));
        await timeTileView(() => page.click('#zoom-norm'), 'norm');
        assert.equal(await page.getAttribute('#zoom-norm', 'aria-pressed'), 'true');
        assert.match(await page.textContent('#zoom-status'), /exact norm-weighted shares \(1024 × 1024\)/);
        const norm = await layer5Tile(head, r, 'norm');
        assert.equal(norm.status, 200);
        const t = decodeTensor(norm.body);
        const box = await mapBox();
        await page.mouse.move(box.x + 0.6 * box.width, box.y + 0.7 * box.height);
        await page.waitForFunction(() => document.querySelector('.tooltip')?.style.display === 'block');
        const [q, k] = (await page.getAttribute('#zoom-map', 'data-hover')).split(',').map(Number);
        const tip = await page.textContent('.tooltip');
        const m = /norm-weighted share (\d\.\d{4}) \(exact\)/.exec(tip);
        assert.ok(m, `tooltip: ${tip}`);
        assert.equal(m[1], t.data[(q - r[0]) * (r[3] - r[2]) + (k - r[2])].toFixed(4));
        await shot('long-norm-tile.png');
        await page.mouse.move(5, 5);
        await timeTileView(() => page.click('#zoom-norm'), 'weights');
        assert.match(await page.textContent('#zoom-status'), /exact weights \(1024 × 1024\)/);
      },
    );

    await suite.test('pan with the buttons and Shift+drag; the token strip follows (timed)', async () => {
      const ms = await timeTile(() => page.click('#pan-right'));
      assert.equal((await mapState()).region, '3584,4608,4096,5120');
      assert.equal(await page.getAttribute('#strip-keys', 'data-first'), '4096');
      const box = await mapBox();
      const cx = box.x + box.width / 2,
        cy = box.y + box.height / 2;
      const ms2 = await timeTile(async () => {
        await page.keyboard.down('Shift');
        await page.mouse.move(cx, cy);
        await page.mouse.down();
        await page.mouse.move(cx + box.width / 4, cy + box.height / 4, { steps: 4 });
        await page.mouse.up();
        await page.keyboard.up('Shift');
      });
      const [q0, q1, k0, k1] = (await mapState()).region.split(',').map(Number);
      assert.equal(q1 - q0, 1024);
      assert.equal(k1 - k0, 1024);
      assert.ok(q0 < 3584 && k0 < 4096, `dragging right and down moves to earlier rows and keys: ${q0}, ${k0}`);
      assert.equal(await page.getAttribute('#strip-rows', 'data-first'), String(q0));
      timings.zoomed_tile_ms.push(ms, ms2);
      console.log(`    pan → tile: ${ms} ms (buttons), ${ms2} ms (drag)`);
    });

    await suite.test('drag a rectangle and wheel to zoom', async () => {
      const box = await mapBox();
      const before = (await mapState()).region.split(',').map(Number);
      const ms = await timeTile(async () => {
        await page.mouse.move(box.x + box.width * 0.25, box.y + box.height * 0.25);
        await page.mouse.down();
        await page.mouse.move(box.x + box.width * 0.5, box.y + box.height * 0.5, { steps: 4 });
        await page.mouse.up();
      });
      const [q0, q1, k0, k1] = (await mapState()).region.split(',').map(Number);
      assert.ok(Math.abs(q0 - (before[0] + 256)) <= 2 && Math.abs(q1 - q0 - 256) <= 4, `rectangle → rows ${q0}..${q1}`);
      assert.ok(Math.abs(k0 - (before[2] + 256)) <= 2 && Math.abs(k1 - k0 - 256) <= 4, `rectangle → keys ${k0}..${k1}`);
      const ms2 = await timeTile(async () => {
        await page.mouse.move(box.x + box.width / 2, box.y + box.height / 2);
        await page.mouse.wheel(0, 300); // out
      });
      const after = (await mapState()).region.split(',').map(Number);
      assert.ok(after[1] - after[0] > q1 - q0, 'the wheel zoomed out');
      timings.zoomed_tile_ms.push(ms, ms2);
      console.log(
        `    zoomed tiles, input to painted frame: ${timings.input_to_tile_ms.join(', ')} ms (target ≤ 200 ms; ` +
          `as the test saw them: ${timings.zoomed_tile_ms.join(', ')} ms)`,
      );
      await page.locator('#head-panel').screenshot({ path: path.join(outDir, 'long-zoomed.png') });
      await page.click('#zoom-reset');
      await waitState('overview', `0,${T},0,${T}`);
    });

    /** A part of the page, taken from the whole page so that the sticky bars stay at its top. */
    const shootPart = async (selector, name) => {
      await page.evaluate(() => window.scrollTo(0, 0));
      const box = await page.locator(selector).boundingBox();
      await page.screenshot({ path: path.join(outDir, name), fullPage: true, clip: box });
    };
    const openView = async (key) => {
      await page.evaluate(() => document.activeElement?.blur());
      const before = await page.getAttribute('body', 'data-ready');
      const t0 = Date.now();
      await page.keyboard.press(key);
      await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, { timeout: 120000 });
      assert.equal(await page.isVisible('#long-notice'), false, `view ${key}: no notice in its place`);
      return Date.now() - t0;
    };

    await suite.test('Model overview: every head from the pooled overviews, none blank (timed)', async () => {
      const ms = await openView('2');
      timings.model_overview_ms = ms;
      console.log(`    model overview of ${T} tokens (every layer's overview): ${ms} ms`);
      assert.equal(await page.isVisible('#model-grid'), true);
      assert.equal(await page.getAttribute('.model-view', 'data-pooled'), 'true');
      const model = await (await fetch(`${base}/api/model`)).json();
      assert.equal(Number(await page.getAttribute('#model-grid', 'data-heads')), model.n_layer * model.n_head);
      assert.match(await page.textContent('#model-intro'), /long text \(8192 tokens\).*largest weight of every block/);
      // Showing data: each thumbnail holds many colours (weights and the hatched future), not one.
      const colours = await page.$eval('#model-grid', (c) => {
        const d = c.getContext('2d').getImageData(0, 0, c.width, c.height).data;
        const seen = new Set();
        for (let i = 0; i < d.length; i += 4 * 7) seen.add((d[i] << 16) | (d[i + 1] << 8) | d[i + 2]);
        return seen.size;
      });
      assert.ok(colours > 40, `${colours} colours in the grid`);
      await shootPart('.model-view', 'long-model-overview.png');
    });

    await suite.test('Head lines: a window of exact weights equal to /api/tile; its buttons move the map', async () => {
      await openView('3');
      const head = Number(new URL(page.url()).searchParams.get('head'));
      assert.equal(await page.isVisible('#lines-window'), true);
      await page.waitForFunction(() => document.querySelector('#lines-window')?.dataset.region === '0,64,0,64');
      assert.equal(await page.getAttribute('#lines-window', 'data-follows'), 'false');
      const tile = decodeTensor(
        (await post(base, '/api/tile', { text, truncate: true, layer: 5, head, q0: 0, q1: 64, k0: 0, k1: 64 })).body,
      );
      const row = 40;
      await page.locator('#lines-canvas').hover({ position: { x: 150, y: 28 + row * 20 + 10 } });
      await page.waitForFunction(() => document.querySelector('.tooltip')?.style.display === 'block');
      const tip = await page.textContent('.tooltip');
      const weights = Array.from(tile.data.subarray(row * 64, row * 64 + 64));
      const top = Math.max(...weights);
      const inside = weights.reduce((a, b) => a + b, 0);
      assert.ok(tip.includes(`: ${top.toFixed(4)}`), `tooltip ${tip}, strongest weight ${top}`);
      assert.ok(tip.includes(`${inside.toFixed(3)} of its weight goes to the keys shown`), tip);
      assert.ok(tip.includes(`token ${row}`), tip);
      await page.mouse.move(5, 5);
      // "Later tokens" moves the window by half and zooms the head panel's map to it: one tile.
      await page.click('#lines-later');
      await waitState('tile', '32,96,32,96');
      await page.waitForFunction(() => document.querySelector('#lines-window')?.dataset.region === '32,96,32,96');
      assert.equal(await page.getAttribute('#lines-window', 'data-follows'), 'true');
      assert.match(await page.textContent('#lines-window-text'), /queries 32–95 → keys 32–95/);
      assert.match(await page.textContent('#lines-note'), /exact weights of this window/);
      assert.ok((await page.$eval('#lines-canvas', (c) => c.height)) > 64 * 20);
      // The export names the window: ...-layer6-head<H>-lines-tokens32-95.png.
      const [download] = await Promise.all([page.waitForEvent('download'), page.click('#export-png')]);
      assert.match(download.suggestedFilename(), new RegExp(`-layer6-head${head + 1}-lines-tokens32-95\\.png$`));
      await download.saveAs(path.join(outDir, 'long-head-lines-export.png'));
      await page.$eval('.lines-view .scroll-y', (e) => (e.scrollTop = 0));
      await shootPart('.lines-view', 'long-head-lines.png');
      await page.click('#zoom-reset');
      await waitState('overview', `0,${T},0,${T}`);
    });

    await suite.test('Compare heads: block by block from the overviews, the distance the test computes', async () => {
      await openView('4');
      const p = new URL(page.url()).searchParams;
      const [a, b] = [p.get('a'), p.get('b')].map((r) => r.split('.').map(Number));
      assert.equal(await page.getAttribute('.compare-view', 'data-streamed'), 'true');
      assert.equal((await page.$$('.compare-fig canvas')).length, 3);
      assert.equal(await page.isVisible('#compare-long-note'), true);
      const shown = /block by block: (\d\.\d{3})/.exec(await page.textContent('#compare-summary'));
      assert.ok(shown, await page.textContent('#compare-summary'));
      // The same from /api/overview: the summed weights of each block over its rows, then the mean
      // over rows of half the summed absolute differences.
      const C = run.overview.cells,
        starts = run.overview.starts;
      const mass = async ([layer, head]) => {
        const t = decodeTensor((await post(base, '/api/overview', { text, truncate: true, layer })).body);
        const sum = t.data.subarray((head * 2 + 0) * C * C, (head * 2 + 1) * C * C);
        return Float64Array.from(sum, (v, i) => v / (starts[Math.floor(i / C) + 1] - starts[Math.floor(i / C)]));
      };
      const [ma, mb] = [await mass(a), await mass(b)];
      let total = 0;
      for (let q = 0; q < C; q++) {
        let d = 0;
        for (let k = 0; k < C; k++) d += Math.abs(ma[q * C + k] - mb[q * C + k]);
        total += d / 2;
      }
      assert.ok(Math.abs(total / C - Number(shown[1])) < 0.0006, `page ${shown[1]}, test ${(total / C).toFixed(4)}`);
      await shootPart('.compare-view', 'long-compare.png');
    });

    await suite.test('what needs the full maps or head outputs says so; no page errors', async () => {
      // The maps toggle: norm-weighted and rollout need the whole maps, so they are disabled with the reason.
      for (const m of ['norm', 'rollout']) {
        assert.equal(await page.locator(`#maps-toggle [data-maps="${m}"]`).isDisabled(), true, m);
        assert.match(await page.getAttribute(`#maps-toggle [data-maps="${m}"]`, 'title'), /too long to keep them all/);
      }
      assert.match(await page.textContent('#maps-note'), /Norm-weighted maps need every full attention map/);
      // The W_O decomposition needs each head's output, which a streamed run does not keep.
      assert.match(await page.textContent('#decomposition-note'), /W_O decomposition needs each head's output/);
      assert.equal(await page.locator('.projection .token-chips').isVisible(), false);
      await openView('1');
      assert.deepEqual(errors, []);
    });

    await suite.test('on a 390 × 844 phone: the long text zooms to a norm-weighted tile', async () => {
      const ctx = await browser.newContext({
        viewport: { width: 390, height: 844 },
        deviceScaleFactor: 2,
        isMobile: true,
        hasTouch: true,
      });
      try {
        const phone = await ctx.newPage();
        const phoneErrors = [];
        phone.on('pageerror', (e) => phoneErrors.push(String(e)));
        await phone.goto(`${base}/?layer=5&head=0`);
        await phone.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 120000 });
        await phone.fill('#text-input', text);
        const before = await phone.getAttribute('body', 'data-ready');
        await phone.press('#text-input', 'Enter');
        await phone.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, {
          timeout: 120000,
        });
        for (let i = 0; i < 3; i++) await phone.click('#zoom-in');
        await phone.click('#zoom-norm');
        await phone.waitForFunction(
          () => {
            const c = document.querySelector('#zoom-map');
            return c.dataset.state === 'tile' && c.dataset.view === 'norm';
          },
          null,
          { timeout: 60000 },
        );
        assert.match(await phone.textContent('#zoom-status'), /exact norm-weighted shares/);
        // The map and its controls fit the phone's width.
        const box = await phone.locator('#zoom-map').boundingBox();
        assert.ok(box.x >= 0 && box.x + box.width <= 390 + 1, `map at ${box.x} + ${box.width}`);
        const controls = await phone.locator('.zoom-controls').boundingBox();
        assert.ok(controls.x + controls.width <= 390 + 1, `controls ${controls.x} + ${controls.width}`);
        await phone.$eval('#zoom-map', (c) => c.scrollIntoView({ block: 'center' }));
        await phone.screenshot({ path: path.join(outDir, 'long-norm-tile-phone.png') });
        assert.deepEqual(phoneErrors, []);
      } finally {
        await ctx.close();
      }
    });

    // Past 512 tokens a run stays dense while it fits the cache's budget (SmolLM2: up to 802 tokens
    // in the default 2 GiB): the views that need whole maps or head outputs stay on, and the model
    // overview pools its thumbnails from the overviews.
    await suite.test('a text of ~700 tokens keeps dense maps: norm-weighted, rollout and W_O answer', async () => {
      const cut = text.lastIndexOf(' ', 2900);
      const mid = text.slice(0, cut);
      const r = await post(base, '/api/run', { text: mid, level: 'token', special: 'keep' });
      assert.equal(r.status, 200, JSON.stringify(r.body).slice(0, 400));
      const n = r.body.n_tokens;
      assert.ok(n > 512 && n < 802, `${n} tokens`);
      assert.equal(r.body.streamed, false);
      assert.equal(r.body.views.norm, null);
      assert.equal(r.body.views.rollout, null);
      for (const view of ['weights', 'norm', 'rollout']) {
        const a = await post(base, '/api/attention', { text: mid, layer: 5, view, dtype: 'uint8' });
        assert.equal(a.status, 200, `${view}: ${JSON.stringify(a.body).slice(0, 300)}`);
      }
      const d = await post(base, '/api/decompose', { text: mid, layer: 5, token: n - 1 });
      assert.equal(d.status, 200, JSON.stringify(d.body).slice(0, 300));
      const before = await page.getAttribute('body', 'data-ready');
      await page.fill('#text-input', mid);
      await page.press('#text-input', 'Enter');
      await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, { timeout: 120000 });
      assert.match(await page.textContent('.text-meta'), new RegExp(`${n} tokens`));
      for (const m of ['norm', 'rollout'])
        assert.equal(await page.locator(`#maps-toggle [data-maps="${m}"]`).isDisabled(), false, m);
      await openView('2');
      assert.equal(await page.getAttribute('.model-view', 'data-pooled'), 'true');
      assert.match(
        await page.textContent('#model-intro'),
        new RegExp(`long text \\(${n} tokens\\) the thumbnails are pooled`),
      );
      await shootPart('.model-view', 'long-dense-model-overview.png');
      await openView('1');
      assert.deepEqual(errors, []);
    });
  } finally {
    await browser.close();
  }
}
