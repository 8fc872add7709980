// The "Maps" toggle (weights / norm-weighted / rollout) in Chromium against the live server: the
// hovered value of a cell equals what /api/attention sends for that view, rollout draws one map
// per layer, and reload and Back keep the choice. Short on purpose: one text, a few clicks.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';
import { decodeTensor } from './harness.mjs';

const TROPHY = "The trophy didn't fit in the suitcase because it was too big.";
const TILE = 168; // layer-view.ts: the side of a head's square, CSS pixels

const readyNumber = (page) =>
  page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, { timeout: 120000 });

async function settle(page, action) {
  const before = await page.evaluate(() => document.body.getAttribute('data-ready'));
  await action();
  await page.waitForFunction(
    (b) => {
      const v = document.body.getAttribute('data-ready');
      return v !== null && v !== b;
    },
    before,
    { timeout: 120000 },
  );
  assert.ok(
    !(await page.evaluate(() => document.body.getAttribute('data-ready'))).startsWith('error'),
    'the app reported an error',
  );
}

async function attention(base, body) {
  const res = await fetch(base + '/api/attention', {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, `/api/attention ${JSON.stringify(body.view)}: ${res.status}`);
  return decodeTensor(await res.arrayBuffer());
}

/** A screenshot of one part of the page with the sticky bars out of the way. */
async function part(page, selector, file) {
  await page.mouse.move(0, 0);
  const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
  await page.locator(selector).screenshot({ path: file });
  await unstick.evaluate((e) => e.remove());
}

/** Hovers cell (q, k) of the n × n square `canvas` and returns the tooltip's number after `label`. */
async function hoverValue(page, canvas, n, q, k, label) {
  // The grid may be drawn again just after a toggle settles (the head importance arriving
  // redraws it), replacing the canvas under the locator, between the scroll and the measure too
  // (boundingBox is then null): then take the new one.
  let box;
  for (let attempt = 0; ; attempt++) {
    try {
      await canvas.scrollIntoViewIfNeeded({ timeout: 5000 });
      box = await canvas.boundingBox();
      if (box) break;
      if (attempt >= 3) throw new Error('the head canvas has no box (detached on every attempt)');
    } catch (e) {
      if (attempt >= 3 || !/not attached/.test(String(e))) throw e;
    }
    await page.waitForTimeout(200);
  }
  await page.mouse.move(0, 0);
  await page.mouse.move(box.x + ((k + 0.5) * TILE) / n, box.y + ((q + 0.5) * TILE) / n);
  await page.waitForFunction((l) => (document.querySelector('.tooltip')?.textContent ?? '').includes(l), label);
  const text = await page.textContent('.tooltip');
  const m = new RegExp(`${label} (\\d\\.\\d+)`).exec(text);
  assert.ok(m, `tooltip "${text}" names the ${label}`);
  return Number(m[1]);
}

/** tag: screenshot prefix; quick: the decoder's short check (norm hover and one rollout map). */
export async function mapsTests(base, suite, outDir, { tag, quick = false }) {
  const model = await (await fetch(base + '/api/model')).json();
  const layer = Math.min(2, model.n_layer - 1),
    head = Math.min(3, model.n_head - 1);
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    const page = await (
      await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 })
    ).newPage();
    const errors = [];
    page.on('pageerror', (e) => errors.push(String(e)));
    await page.goto(`${base}/?text=${encodeURIComponent(TROPHY)}&layer=${layer}&head=${head}`);
    await readyNumber(page);
    const n = (
      await (
        await fetch(base + '/api/run', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ text: TROPHY, truncate: true }),
        })
      ).json()
    ).n_tokens;
    // A cell below the diagonal (visible to a causal query) and away from the special tokens.
    const q = n - 3,
      k = 2;

    await suite.test(`${tag}: norm-weighted maps: the hovered value is the API's for that cell`, async () => {
      await settle(page, () => page.click('#maps-toggle [data-maps="norm"]'));
      assert.equal(new URL(page.url()).searchParams.get('maps'), 'norm');
      assert.equal(await page.getAttribute('#maps-toggle [data-maps="norm"]', 'aria-pressed'), 'true');
      assert.match(await page.textContent('.layer-view .legend figcaption'), /norm-weighted share/);
      const api = await attention(base, { text: TROPHY, truncate: true, layer, head, view: 'norm' });
      const expected = api.data[q * n + k];
      const shown = await hoverValue(
        page,
        page.locator(`#head-grid .head-tile[data-head="${head}"] canvas`),
        n,
        q,
        k,
        'norm-weighted share',
      );
      assert.ok(Math.abs(shown - expected) <= 6e-5, `tooltip ${shown}, API ${expected}`);
      const weights = await attention(base, { text: TROPHY, truncate: true, layer, head });
      assert.ok(
        api.data.some((v, i) => Math.abs(v - weights.data[i]) > 0.01),
        'the norm-weighted map differs from the weights',
      );
      // The statistics panel: special-token share by weight and by norm side by side.
      const sink = await page.getAttribute('#sink-compare [data-stat="sink_mass_norm"]', 'data-value');
      assert.ok(sink !== null && sink !== '', 'sink_mass_norm is shown');
      await part(page, '.layer-view', path.join(outDir, `30-${tag}-maps-norm.png`));
      await part(page, '#head-panel', path.join(outDir, `32-${tag}-maps-norm-head-panel.png`));
    });

    await suite.test(`${tag}: rollout is one map for the layer, with the API's values`, async () => {
      await settle(page, () => page.click('#maps-toggle [data-maps="rollout"]'));
      assert.equal(await page.locator('#head-grid canvas').count(), 1);
      const api = await attention(base, { text: TROPHY, truncate: true, layer, view: 'rollout' });
      assert.deepEqual(api.shape, [1, 1, n, n]);
      const shown = await hoverValue(page, page.locator('#head-grid canvas'), n, q, k, 'rollout share');
      assert.ok(Math.abs(shown - api.data[q * n + k]) <= 6e-5, `tooltip ${shown}, API ${api.data[q * n + k]}`);
      assert.match(await page.textContent('#layer-title'), /rollout/);
      await part(page, '.layer-view', path.join(outDir, `31-${tag}-maps-rollout.png`));
    });

    if (!quick)
      await suite.test(`${tag}: reload keeps the maps; Back returns to the previous ones`, async () => {
        await page.reload();
        await readyNumber(page);
        assert.equal(await page.getAttribute('#maps-toggle [data-maps="rollout"]', 'aria-pressed'), 'true');
        assert.equal(await page.locator('#head-grid canvas').count(), 1);
        await settle(page, () => page.goBack());
        assert.equal(new URL(page.url()).searchParams.get('maps'), 'norm');
        assert.equal(await page.locator('#head-grid canvas').count(), model.n_head);
        // Keyboard: n moves to the next maps (norm → rollout).
        await page.evaluate(() =>
          document.activeElement instanceof HTMLElement ? document.activeElement.blur() : undefined,
        );
        await settle(page, () => page.keyboard.press('n'));
        assert.equal(new URL(page.url()).searchParams.get('maps'), 'rollout');
        // The model overview follows: its legend names the rollout.
        await settle(page, () => page.click('.tab[data-view="model"]'));
        assert.match(await page.textContent('.model-view .legend figcaption'), /rollout share/);
        await part(page, '.model-view', path.join(outDir, `33-${tag}-maps-rollout-model.png`));
      });
    if (!quick)
      await suite.test(
        `${tag}: a view the run cannot show is disabled, with the reason in its title and a visible note`,
        async () => {
          // The server's reason as /api/run would give it for a long text (the long-text pass has the real one).
          const reason =
            "the rollout view multiplies every layer's T x T map (n_layer · T³): this text's 1500 tokens are over the limit of 1024; analyse a shorter text";
          const other = await page.context().newPage();
          await other.route('**/api/run', async (route) => {
            const res = await route.fetch();
            const run = await res.json();
            run.views = { ...run.views, rollout: reason };
            await route.fulfill({ response: res, json: run });
          });
          await other.goto(`${base}/?text=${encodeURIComponent(TROPHY)}&layer=${layer}&head=${head}&maps=rollout`);
          await readyNumber(other);
          const button = other.locator('#maps-toggle [data-maps="rollout"]');
          assert.equal(await button.isDisabled(), true);
          // The server's reason in the reader's words: no T × T, no n_layer · T³.
          assert.match(await button.getAttribute('title'), /not available: Rollout multiplies the maps of every layer/);
          assert.equal(await other.isVisible('#maps-note'), true);
          assert.match(
            await other.textContent('#maps-note'),
            /Rollout multiplies the maps of every layer.*Analyse a shorter text to see it \(the weights are shown instead\)\./,
          );
          assert.equal(await other.locator('#head-grid canvas').count(), model.n_head, 'the weights are drawn instead');
          assert.match(await other.textContent('.layer-view .legend figcaption'), /attention weight/);
          await other.close();
        },
      );
    assert.deepEqual(errors, []);
  } finally {
    await browser.close();
  }
}
