// The explorer from the first minute to the phone (issue 13, items 5–9), on one live server:
// what the first screen of a 1400 × 900 window holds, one numbering of heads and layers, statistic
// cards that explain themselves, the page while it computes, a text over the model's limit,
// decoded tokens, tabs and Back/Forward, exports that stand alone, generation steps (causal
// models), and a 390 × 844 touch screen. Screenshots go to test-results/ (prefix 13-<model>-).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

const TROPHY = "The trophy didn't fit in the suitcase because it was too big.";
/** Bytes that a byte-level tokenizer writes as Ġ, Ċ and Ã¼-style symbols. */
const BYTE_SYMBOLS = /[ĠĊÃ]/;

async function ready(page) {
  return page.evaluate(() => document.body.getAttribute('data-ready'));
}

/** Runs `action` and waits until the app has finished the refresh it caused. */
async function settle(page, action, timeout = 120000) {
  const before = await ready(page);
  await action();
  await page.waitForFunction(
    (b) => {
      const v = document.body.getAttribute('data-ready');
      return v !== null && v !== b;
    },
    before,
    { timeout },
  );
  const state = await ready(page);
  if (state.startsWith('error')) throw new Error(`the app reported an error: ${await page.textContent('#run-status')}`);
}

const params = (page) => new URL(page.url()).searchParams;

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, `${pathName}: ${res.status}`);
  return res.json();
}

/** The text of a download triggered by `click`. */
async function downloadText(page, click) {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  return fs.readFileSync(await download.path(), 'utf8');
}

/**
 * tag: a short name for screenshots ("minilm", "smollm2"); folder: the model folder's name, which
 * the page must show as the model's name; truncate: run the "truncate to N tokens" test (an
 * analysis of the server's --max-tokens tokens, twice).
 */
export async function explorerTests(base, suite, outDir, { tag, folder, truncate = true }) {
  const model = await (await fetch(base + '/api/model')).json();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const shot = (page, name, opts = {}) =>
    page.screenshot({ path: path.join(outDir, `13-${tag}-${name}.png`), ...opts });
  try {
    const desk = await browser.newContext({
      viewport: { width: 1400, height: 900 },
      acceptDownloads: true,
      deviceScaleFactor: 1,
    });
    const page = await desk.newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    const url = `${base}/?text=${encodeURIComponent(TROPHY)}`;

    await suite.test(
      `${tag} 1400×900: the text box and the heatmaps are on the first screen; the name is the folder's`,
      async () => {
        await page.goto(url);
        await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
          timeout: 120000,
        });
        assert.equal(model.name, folder);
        assert.equal(await page.textContent('#model-name'), folder);
        assert.equal(
          await page.$eval('#learning-context', (d) => d.open),
          false,
          'the learning context starts as a strip',
        );
        // data-ready is set when the analysis is in; the grid's canvases may be laid out a frame later.
        await page.locator('#head-grid canvas').first().waitFor({ state: 'visible', timeout: 10000 });
        const box = await page.locator('#text-input').boundingBox();
        const tile = await page.locator('#head-grid canvas').first().boundingBox();
        assert.ok(box.y + box.height < 900, `text box ends at ${box.y + box.height}`);
        assert.ok(tile.y + tile.height / 2 < 900, `first heatmap's middle at ${tile.y + tile.height / 2}`);
        await shot(page, 'first-screen-1400x900');
      },
    );

    await suite.test(`${tag}: one numbering of heads and layers in every view`, async () => {
      await settle(page, () => page.selectOption('#head-select', '1'));
      assert.match(await page.textContent('#head-title'), /^Head 2 \(index 1\) – /);
      assert.equal(await page.$eval('#head-select option', (o) => o.textContent), 'Head 1 (index 0)');
      assert.equal(await page.$eval('#layer-select option', (o) => o.textContent), 'Layer 1 (index 0)');
      assert.match(await page.textContent('#layer-title'), /^Layer 1: all/);
      assert.equal(await page.$eval('#head-grid .head-tile .tile-name', (e) => e.textContent), 'H1');
      assert.match(await page.textContent('#numbering-note'), /counted from 1/);
      await settle(page, () => page.click('.tab[data-view="lines"]'));
      assert.match(await page.textContent('#lines-title'), /^Layer 1 · Head 2 – /);
      await settle(page, () => page.click('.tab[data-view="compare"]'));
      assert.match(await page.textContent('.compare-fig[data-panel="a"]'), /^A: Layer 1, Head 1 – /);
      assert.match(await page.textContent('#projection-title'), /^Concat\(head₁, …, head/);
    });

    await suite.test(`${tag}: tabs scroll to their view; Back and Forward move between views`, async () => {
      await page.evaluate(() => window.scrollTo(0, 0));
      await settle(page, () => page.click('.tab[data-view="model"]'));
      assert.equal(params(page).get('view'), 'model');
      const top = await page.$eval('#views', (e) => e.getBoundingClientRect().top);
      assert.ok(top >= 0 && top < 300, `the view starts ${top} px from the top`);
      await settle(page, () => page.goBack());
      assert.equal(params(page).get('view'), 'compare');
      assert.equal(await page.isVisible('[data-panel="a"]'), true);
      await settle(page, () => page.goBack());
      assert.equal(params(page).get('view'), 'lines');
      await settle(page, () => page.goForward());
      assert.equal(params(page).get('view'), 'compare');
      await settle(page, () => page.click('.tab[data-view="layer"]'));
    });

    await suite.test(`${tag}: statistic cards explain themselves on hover and on keyboard focus`, async () => {
      await page.focus('#head-stats [data-stat="sparsity"]');
      assert.equal(await page.isVisible('#stat-help-sparsity'), true);
      assert.match(await page.textContent('#stat-help-sparsity'), /threshold: 10 %/);
      await page.hover('#head-stats [data-stat="entropy_bits"]');
      assert.equal(await page.isVisible('#stat-help-entropy_bits'), true);
      assert.match(await page.textContent('#stat-help-entropy_bits'), /High entropy = spread out/);
      await page.hover('#head-stats [data-stat="avg_attention"]');
      assert.match(await page.textContent('#stat-help-avg_attention'), /Average attention measures/);
      await page.locator('#head-stats').screenshot({ path: path.join(outDir, `13-${tag}-stat-help.png`) });
      await page.mouse.move(0, 0);
    });

    await suite.test(
      `${tag}: while a text is analysed the views are dimmed, a progress bar runs, Analyse is disabled`,
      async () => {
        let release;
        const held = new Promise((r) => (release = r));
        await page.route('**/api/run', async (route) => {
          await held;
          await route.continue();
        });
        await page.fill('#text-input', 'Heads can be watched while they work.');
        const before = await ready(page);
        try {
          await page.click('#analyse');
          await page.waitForFunction(() => document.body.classList.contains('computing'));
          assert.equal(await page.isDisabled('#analyse'), true, 'Analyse is disabled');
          assert.equal(await page.isVisible('#progress'), true, 'the progress bar runs');
          const opacity = Number(await page.$eval('#views', (e) => getComputedStyle(e).opacity));
          assert.ok(opacity < 0.5, `the old views are dimmed (opacity ${opacity})`);
          await shot(page, 'computing');
        } finally {
          release();
          await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, {
            timeout: 120000,
          });
          await page.unroute('**/api/run');
        }
        assert.equal(await page.$eval('body', (b) => b.classList.contains('computing')), false);
        assert.equal(await page.isDisabled('#analyse'), false);
        assert.equal(await page.isVisible('#progress'), false);
      },
    );

    await suite.test(`${tag}: tokens are shown decoded, without byte-level symbols`, async () => {
      const text = 'Grüße aus Köln:\nthe naïve café.';
      await page.fill('#text-input', text);
      await settle(page, () => page.click('#analyse'));
      const run = await post(base, '/api/run', { text, truncate: true });
      const labels = await page.$$eval('.token-chips .chip.token', (els) => els.map((e) => e.textContent));
      assert.equal(labels.length, run.n_tokens);
      for (const l of labels) assert.ok(!BYTE_SYMBOLS.test(l), `token label "${l}"`);
      assert.ok(
        labels.some((l) => /ü|ö|ï|é/.test(l)),
        `accented letters shown: ${labels.join(' ')}`,
      );
      // The page's labels are the server's display texts, which are slices of the text.
      assert.deepEqual(
        labels,
        run.tokens.map((t) => (t.display.length > 18 ? t.display.slice(0, 17) + '…' : t.display)),
      );
    });

    if (truncate) {
      await suite.test(`${tag}: a text over the model's limit gets a "truncate to N tokens" button`, async () => {
        const long = Array.from({ length: model.limits.max_tokens }, (_, i) => `word${i % 50}`).join(' ');
        await page.fill('#text-input', long);
        await settle(page, () => page.click('#analyse'));
        const button = page.locator('#truncate');
        assert.equal(await button.textContent(), `Truncate to ${model.limits.max_tokens} tokens`);
        assert.doesNotMatch(await page.textContent('.sentence'), /truncate": true|text_too_long/);
        await shot(page, 'truncate');
        await settle(page, () => button.click());
        const kept = await page.inputValue('#text-input');
        assert.ok(kept.length < long.length && long.startsWith(kept), 'the text is cut to its analysed beginning');
        const run = await post(base, '/api/run', { text: kept });
        assert.equal(run.truncated, false);
        assert.ok(run.n_tokens <= model.limits.max_tokens);
        assert.equal(await page.isVisible('#truncate'), false);
      });
    }

    await suite.test(`${tag}: exported pictures carry title, model, layer, head, role and the text`, async () => {
      await page.fill('#text-input', TROPHY);
      await settle(page, () => page.click('#analyse'));
      const run = await post(base, '/api/run', { text: TROPHY, truncate: true });
      const layer = Number(params(page).get('layer')),
        head = Number(params(page).get('head'));
      const role = run.heads[layer * model.n_head + head].roles.primary.name;
      const check = (svg, what) => {
        for (const needle of [
          what,
          folder,
          `Layer ${layer + 1} (index ${layer})`,
          `Head ${head + 1} (index ${head})`,
          role,
          'trophy',
          'suitcase',
        ])
          assert.ok(svg.includes(needle.replace(/'/g, '&apos;')), `${what}: "${needle}" in the SVG`);
        assert.ok(svg.includes('>trophy</text>'), `${what}: the heatmaps carry their token labels`);
      };
      check(await downloadText(page, () => page.click('#export-svg')), 'Layer heads view');
      check(await downloadText(page, () => page.click('#head-export-svg')), 'selected head');
      const png = await Promise.all([page.waitForEvent('download'), page.click('#head-export-png')]);
      fs.copyFileSync(await png[0].path(), path.join(outDir, `13-${tag}-export-head.png`));
    });

    if (model.causal) {
      await suite.test(
        `${tag}: after Generate step 1 is selected and locked, arrows move through every step, reload restores them`,
        async () => {
          const prompt = 'The capital of France is';
          await page.fill('#text-input', prompt);
          await settle(page, () => page.click('#analyse'));
          await settle(page, () => page.click('#generate'));
          await page.waitForSelector('#step-slider');
          const n = Number(await page.getAttribute('#step-slider', 'max')) + 1;
          const g = await post(base, '/api/generate', { text: prompt, max_new_tokens: 16 }); // greedy: the same steps
          assert.equal(g.generated.length, n);
          // A step locks the query that produced its token: the position before it.
          const first = g.generated[0].position - 1;
          assert.equal(Number(params(page).get('token')), first);
          assert.equal(Number(params(page).get('lock')), first);
          assert.match(await page.textContent('#step-label'), new RegExp(`^ 1 of ${n}: `));
          assert.ok(!BYTE_SYMBOLS.test(await page.textContent('#step-label')), 'the step names its token decoded');
          assert.equal(await page.evaluate(() => document.activeElement?.id), 'step-slider');
          // Each key press is checked as soon as the step label follows (a newer refresh abandons an
          // older one, so the walk does not wait for every step's W_O decomposition); then settle.
          for (let s = 2; s <= n; s++) {
            await page.keyboard.press('ArrowRight');
            await page.waitForFunction(
              (want) => document.getElementById('step-label')?.textContent.startsWith(want),
              ` ${s} of ${n}: `,
              { timeout: 60000 },
            );
            assert.equal(Number(params(page).get('lock')), g.generated[s - 1].position - 1);
          }
          await settle(page, () => page.keyboard.press('ArrowLeft'));
          assert.match(await page.textContent('#step-label'), new RegExp(`^ ${n - 1} of ${n}: `));
          await settle(page, () => page.reload());
          await page.waitForSelector('#step-slider');
          assert.match(await page.textContent('#step-label'), new RegExp(`^ ${n - 1} of ${n}: `));
          assert.equal(Number(params(page).get('lock')), g.generated[n - 2].position - 1);
          await page.locator('.sentence').screenshot({ path: path.join(outDir, `13-${tag}-generation-steps.png`) });
        },
      );
    }

    await suite.test(`${tag}: no errors in the page (1400×900)`, async () => {
      assert.deepEqual(errors, []);
    });
    await desk.close();

    const phone = await browser.newContext({
      viewport: { width: 390, height: 844 },
      isMobile: true,
      hasTouch: true,
      deviceScaleFactor: 2,
      acceptDownloads: true,
    });
    const mp = await phone.newPage();
    const phoneErrors = [];
    mp.on('pageerror', (e) => phoneErrors.push(String(e)));

    await suite.test(
      `${tag} 390×844: one-line header, sticky horizontal toolbar, a layer select, nothing wider than the screen`,
      async () => {
        await mp.goto(url);
        await mp.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
          timeout: 120000,
        });
        await shot(mp, 'phone-top');
        const header = await mp.locator('header.top').boundingBox();
        assert.ok(header.height <= 50, `header is ${header.height} px tall`);
        assert.equal(await mp.isVisible('#layer-select'), true);
        assert.equal(await mp.isVisible('.layer-control .segmented'), false);
        const controls = await mp.$eval('.toolbar .controls', (e) => ({
          overflow: getComputedStyle(e).overflowX,
          wrap: getComputedStyle(e).flexWrap,
        }));
        assert.deepEqual(controls, { overflow: 'auto', wrap: 'nowrap' });
        await mp.evaluate(() => window.scrollTo(0, 1500));
        const bar = await mp.locator('#toolbar').boundingBox();
        assert.ok(bar.y >= 0 && bar.y < 80, `the toolbar stays in sight (top ${bar.y})`);
        assert.ok(
          (await mp.evaluate(() => document.documentElement.scrollWidth)) <= 390,
          'no sideways scrolling of the page',
        );
        await shot(mp, 'phone-scrolled');
        await settle(mp, () => mp.selectOption('#layer-select', String(model.n_layer - 1)));
        assert.equal(params(mp).get('layer'), String(model.n_layer - 1));
      },
    );

    await suite.test(`${tag} 390×844: head lines and W_O strips fit the width`, async () => {
      await settle(mp, () => mp.click('.tab[data-view="lines"]'));
      const lines = await mp.locator('#lines-canvas').boundingBox();
      assert.ok(lines.x >= 0 && lines.x + lines.width <= 390, `lines view from ${lines.x} to ${lines.x + lines.width}`);
      // A strip keeps at least one pixel per number: a longer one scrolls inside its column.
      const strips = await mp.$$eval('.vector-strip', (els) =>
        els
          .map((e) => [e.getBoundingClientRect(), e.scrollWidth, e.clientWidth, e.querySelector('canvas')])
          .map(([r, sw, cw, c]) => [
            r.left,
            r.right,
            sw > cw ? c.getBoundingClientRect().width / Number(c.dataset.n ?? 1) : 1,
          ]),
      );
      assert.ok(strips.length > 0);
      for (const [l, r, cell] of strips) {
        assert.ok(l >= 0 && r <= 390, `W_O strip from ${l} to ${r}`);
        assert.ok(cell >= 1, `a scrolled strip keeps ${cell} px per number`);
      }
      assert.ok((await mp.evaluate(() => document.documentElement.scrollWidth)) <= 390);
      await mp.$eval('#views', (e) => e.scrollIntoView());
      await shot(mp, 'phone-lines');
    });

    await suite.test(`${tag} 390×844: a tap shows a value, a second tap locks`, async () => {
      // Head lines: tap a query token on the left once (its lines and weights), twice (locked).
      // (The emulated mouse is parked on the header: Chromium replays its position after a scroll.)
      await mp.mouse.move(1, 1);
      await mp.$eval('#lines-canvas', (c) => c.scrollIntoView({ block: 'center' }));
      const box = await mp.locator('#lines-canvas').boundingBox();
      const scale = box.width / (await mp.$eval('#lines-canvas', (c) => parseFloat(c.style.width)));
      const at = { x: box.x + 60 * scale, y: box.y + (28 + 2 * 20 + 10) * scale }; // row 2 (drawing coordinates of lines-view.ts)
      await mp.touchscreen.tap(at.x, at.y);
      await mp.waitForFunction(() => document.querySelector('.tooltip')?.style.display === 'block');
      assert.match(await mp.textContent('.tooltip'), /attends to/);
      assert.equal(params(mp).get('lock'), null, 'one tap only shows');
      await settle(mp, () => mp.touchscreen.tap(at.x, at.y));
      assert.equal(params(mp).get('lock'), '2');
      // The selected head's map: one tap shows the cell's weight, the second picks its query.
      const map = mp.locator('#head-panel canvas.labeled-heatmap');
      await mp.$eval('#head-panel canvas.labeled-heatmap', (c) => c.scrollIntoView({ block: 'center' }));
      const mb = await map.boundingBox();
      const cell = { x: mb.x + mb.width - 6, y: mb.y + mb.height - 6 };
      const token = params(mp).get('token');
      await mp.touchscreen.tap(cell.x, cell.y);
      await mp.waitForFunction(() => /weight|masked/.test(document.querySelector('.tooltip')?.textContent ?? ''));
      assert.equal(params(mp).get('token'), token);
      await settle(mp, () => mp.touchscreen.tap(cell.x, cell.y));
      assert.notEqual(params(mp).get('token'), token);
      await shot(mp, 'phone-tap');
      assert.deepEqual(phoneErrors, []);
    });
  } finally {
    await browser.close();
  }
}
