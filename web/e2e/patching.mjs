// The Patching and Logit lens views in Chromium against one live server, at 1400 × 900 and on a
// 390 × 844 phone: the example pair's tokens and counts, a sweep whose grid has a cell per layer ×
// head and shows the API's numbers, a click on a head that runs path patching to every later head,
// a corrupted prompt of another length refused in words, key/value heads labelled with their group
// (decoders), and the logit lens's n_layer + 1 rows (decoders) or its refusal (encoders).
// Decoders patch a few layers only, so that the pass stays short. Screenshots: test-results/30-<tag>-*.png.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

async function open(browser, base, viewport, view) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${base}/?view=${view}`);
  await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
    timeout: 120000,
  });
  return { context, page, errors };
}

/** Runs the sweep in the page (layers as the page counts them, "" for all) and waits for its grid. */
async function runSweep(page, site, layers) {
  await page.selectOption('#patch-site', site);
  await page.fill('#patch-layers', layers);
  await page.click('#patch-run');
  await page.waitForFunction(() => document.querySelector('.patching-view')?.dataset.state !== 'running', null, {
    timeout: 120000,
  });
  const state = await page.$eval('.patching-view', (el) => el.dataset.state);
  if (state !== 'ready') throw new Error(`the sweep ended in "${state}": ${await page.textContent('#patch-status')}`);
}

/** The page's request as the API takes it, from the fields shown. */
async function requestShown(page, model, layers) {
  const r = {
    clean: await page.inputValue('#patch-clean'),
    corrupt: await page.inputValue('#patch-corrupt'),
    sites: [await page.inputValue('#patch-site')],
    direction: await page.inputValue('#patch-direction'),
    metric: await page.inputValue('#patch-metric'),
  };
  if (model.causal)
    Object.assign(r, { answer: await page.inputValue('#patch-answer'), wrong: await page.inputValue('#patch-wrong') });
  if (layers.length) r.layers = layers;
  return r;
}

export async function patchingTests(base, suite, outDir, { tag }) {
  const model = await (await fetch(base + '/api/model')).json();
  const L = model.n_layer,
    H = model.n_head;
  // Decoders: the last two layers (page numbering), so that a sweep is a few seconds on two cores.
  const layersText = model.causal ? `${L - 1}-${L}` : '';
  const layers = model.causal ? [L - 2, L - 1] : [];
  // A part of the page, with the sticky bars let go so that they do not cover it.
  const shot = async (page, selector, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: path.join(outDir, `30-${tag}-${name}.png`) });
    await unstick.evaluate((e) => e.remove());
  };
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    for (const viewport of [
      { width: 1400, height: 900 },
      { width: 390, height: 844 },
    ]) {
      const size = `${viewport.width}×${viewport.height}`;
      const { context, page, errors } = await open(browser, base, viewport, 'patching');
      await suite.test(`${tag} ${size}: the example pair's tokens match in count`, async () => {
        await page.waitForSelector('#patch-count[data-match="true"]', { timeout: 30000 });
        const clean = await page.inputValue('#patch-clean');
        const tokens = await post(base, '/api/tokenize', { text: clean });
        assert.equal(Number(await page.getAttribute('#patch-clean-tokens', 'data-count')), tokens.body.n_tokens);
        assert.equal(await page.$$eval('#patch-clean-tokens .chip', (els) => els.length), tokens.body.n_tokens);
        assert.match(
          await page.textContent('#patch-count'),
          new RegExp(`Both prompts are ${tokens.body.n_tokens} tokens`),
        );
        assert.equal(await page.isVisible('#patch-answer'), model.causal);
        if (model.causal) await page.waitForSelector('#patch-answer-tokens .token-count.ok', { timeout: 30000 });
      });

      await suite.test(
        `${tag} ${size}: a head sweep fills an n_layer × n_head grid with the API's numbers`,
        async () => {
          await runSweep(page, 'head', layersText);
          const cells = await page.$$eval('#patch-grid .patch-cell', (els) =>
            els.map((e) => ({
              layer: Number(e.dataset.layer),
              head: Number(e.dataset.head),
              n: e.dataset.normalised,
              empty: e.classList.contains('empty'),
            })),
          );
          assert.equal(cells.length, L * H);
          const api = await post(base, '/api/patch', await requestShown(page, model, layers));
          assert.equal(api.status, 200, JSON.stringify(api.body));
          assert.equal(cells.filter((c) => !c.empty).length, api.body.results.length);
          for (const e of api.body.results) {
            const c = cells[e.layer * H + e.head];
            assert.deepEqual([c.layer, c.head], [e.layer, e.head]);
            assert.equal(Number(c.n), e.normalised, `L${e.layer} H${e.head}`);
          }
          assert.match(await page.textContent('.patching-view .legend figcaption'), /normalised effect/);
          await page.hover(`#patch-grid .patch-cell[data-layer="${L - 1}"][data-head="0"]`);
          assert.match(await page.textContent('.tooltip'), /normalised effect .*clean/s);
          await shot(page, '#patch-result', `${viewport.width}-sweep`);
        },
      );

      await suite.test(`${tag} ${size}: clicking a head runs path patching to every later head`, async () => {
        const layer = L - 2;
        await page.click(`#patch-grid .patch-cell[data-layer="${layer}"][data-head="0"]`);
        await page.waitForFunction(() => document.querySelector('#patch-path')?.dataset.state === 'ready', null, {
          timeout: 120000,
        });
        const path = await page.$$eval(
          '#path-grid .patch-cell',
          (els) => els.filter((e) => !e.classList.contains('empty')).length,
        );
        assert.equal(path, (L - 1 - layer) * H);
        assert.equal(await page.$$eval('#path-grid .patch-cell', (els) => els.length), L * H);
        assert.match(await page.textContent('#path-direct'), /Direct effect on the output .*normalised -?\d/);
        assert.match(await page.textContent('#path-title'), new RegExp(`from L${layer + 1} H1`));
        await shot(page, '#patch-path', `${viewport.width}-path`);
      });

      await suite.test(`${tag} ${size}: a corrupted prompt of another length is refused in words`, async () => {
        const clean = await page.inputValue('#patch-clean');
        await page.fill('#patch-corrupt', clean.replace(/\.?$/, ' and then some more words.'));
        await page.waitForSelector('#patch-count[data-match="false"]', { timeout: 30000 });
        assert.match(await page.textContent('#patch-count'), /same number of tokens/);
        assert.ok(await page.$('#patch-result.stale'), 'the old result is marked out of date');
        await page.click('#patch-run');
        await page.waitForFunction(() => document.querySelector('.patching-view')?.dataset.state === 'error', null, {
          timeout: 60000,
        });
        const status = await page.textContent('#patch-status');
        assert.match(
          status,
          /This pair cannot be patched: the clean prompt is \d+ tokens and the corrupted one \d+; patching needs the same number of tokens/,
        );
        if (viewport.width < 500) {
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(overflow <= 1, `the page is ${overflow} px wider than the screen`);
        }
        await shot(page, '.patching-view', `${viewport.width}-refusal`);
      });

      if (model.causal && viewport.width > 500)
        await suite.test(`${tag} ${size}: keys are patched per key/value head, labelled with their group`, async () => {
          await page.click('#patch-example');
          await page.waitForSelector('#patch-count[data-match="true"]', { timeout: 30000 });
          await runSweep(page, 'k', String(L));
          const cells = await page.$$eval('#patch-grid .patch-cell', (els) => els.length);
          assert.equal(cells, L * model.n_kv_head);
          const per = H / model.n_kv_head;
          const labels = await page.$$eval('#patch-grid .column-label', (els) => els.map((e) => e.textContent));
          assert.deepEqual(
            labels,
            Array.from({ length: model.n_kv_head }, (_, g) => `KV ${g + 1} · heads ${g * per + 1}–${(g + 1) * per}`),
          );
          assert.match(await page.textContent('#patch-kv-note'), /whole group of query heads/);
        });
      assert.deepEqual(errors, []);
      await context.close();

      const lens = await open(browser, base, viewport, 'lens');
      await suite.test(
        `${tag} ${size}: the logit lens ${model.causal ? 'has a row per layer and the embeddings' : 'is refused for an encoder'}`,
        async () => {
          await lens.page.waitForFunction(
            () => ['ready', 'error'].includes(document.querySelector('.lens-view')?.dataset.state),
            null,
            { timeout: 60000 },
          );
          if (!model.causal) {
            assert.match(await lens.page.textContent('#lens-status'), /is an encoder .*the logit lens needs a decoder/);
            const refused = await post(base, '/api/logit_lens', { text: 'The animal was tired.' });
            assert.equal(refused.status, 400);
            assert.equal(refused.body.error.code, 'not_causal');
            assert.match(refused.body.error.message, /the logit lens needs a decoder/);
            assert.equal(await lens.page.isVisible('#lens-table'), false);
          } else {
            assert.equal(await lens.page.$$eval('#lens-table tbody tr', (els) => els.length), L + 1);
            const text = await lens.page.evaluate(() => new URLSearchParams(location.search).get('text'));
            const api = await post(base, '/api/logit_lens', {
              text: text ?? "The animal didn't cross the street because it was too tired.",
              top_k: 5,
            });
            assert.equal(api.status, 200);
            const last = await lens.page.$$eval(`#lens-table tbody tr[data-layer="${L}"] .lens-token`, (els) =>
              els.map((e) => e.textContent),
            );
            // The page writes a leading space as ␣ and line breaks as ↵.
            const shown = (t) => t.replace(/^ /, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥');
            assert.equal(last[0], shown(api.body.layers[L].top[0].text));
            assert.equal(
              await lens.page.getAttribute(`#lens-table tbody tr[data-layer="${L}"] .lens-followed`, 'data-rank'),
              '0',
            );
            await lens.page.fill('#lens-follow', ' street');
            await lens.page.press('#lens-follow', 'Enter');
            await lens.page.waitForFunction(
              () => /street/.test(document.querySelector('#lens-followed-head')?.textContent ?? ''),
              null,
              { timeout: 60000 },
            );
          }
          if (viewport.width < 500) {
            const overflow = await lens.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
            assert.ok(overflow <= 1, `the page is ${overflow} px wider than the screen`);
          }
          await shot(lens.page, '.lens-view', `${viewport.width}-lens`);
        },
      );
      assert.deepEqual(lens.errors, []);
      await lens.context.close();
    }
  } finally {
    await browser.close();
  }
}
