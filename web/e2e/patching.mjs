// The Patching and Logit lens views in Chromium against one live server, at 1400 × 900 and on a
// 390 × 844 phone: the example pair's tokens and counts, a sweep whose grid has a cell per layer ×
// head and shows the API's numbers, a click on a head that runs path patching to every later head,
// the clicked head's logit lens (decoders: the numbers of POST /api/head_lens, a later click
// winning over an earlier one, dimmed when the answers change; encoders: a line, and no request),
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
  // The head lens requests the page makes (none on an encoder).
  const headLensRequests = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === '/api/head_lens') headLensRequests.push(r.postData());
  });
  await page.goto(`${base}/?view=${view}`);
  await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
    timeout: 120000,
  });
  return { context, page, errors, headLensRequests };
}

/** A head lens effect as the page writes it: sign and two decimals. */
const signedEffect = (v) => `${v >= 0 ? '+' : ''}${v.toFixed(2)}`;
/** A head lens token as the page writes it: a leading space as ␣, line breaks as ↵, at most 16 characters. */
function lensToken(text) {
  const t = text.replace(/^ /, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥').replace(/\s+/g, ' ');
  return t.length > 16 ? t.slice(0, 15) + '…' : t;
}

/** Waits until the head lens panel has settled on head (layer, head). */
async function waitForHeadLens(page, layer, head) {
  await page.waitForFunction(
    ([l, h]) => {
      const d = document.querySelector('#head-lens')?.dataset;
      return d && d.layer === String(l) && d.head === String(h) && d.state !== 'running';
    },
    [layer, head],
    { timeout: 60000 },
  );
  const state = await page.getAttribute('#head-lens', 'data-state');
  if (state !== 'ready')
    throw new Error(`the head lens ended in "${state}": ${await page.textContent('#head-lens-status')}`);
}

/** What the head lens panel shows, next to a direct POST /api/head_lens for the same head and prompts. */
async function checkHeadLens(page, base, model, layer, head) {
  await waitForHeadLens(page, layer, head);
  const tokens = [await page.inputValue('#patch-answer'), await page.inputValue('#patch-wrong')];
  const text = await page.inputValue('#patch-clean');
  const api = await post(base, '/api/head_lens', { text, layer, head, tokens, top_k: 8 });
  assert.equal(api.status, 200, JSON.stringify(api.body));
  const r = api.body;
  assert.equal(
    await page.textContent('#head-lens-title'),
    `Logit lens of L${layer + 1} H${head + 1} (index ${layer}.${head})`,
  );
  const diff = r.followed[0].logit - r.followed[1].logit;
  assert.equal(await page.textContent('#head-lens-diff strong'), signedEffect(diff));
  assert.ok(Math.abs(Number(await page.getAttribute('#head-lens-diff', 'data-value')) - diff) < 1e-9);
  assert.match(await page.textContent('#head-lens-diff'), /answer − wrong = [+-]\d+\.\d\d/);
  const followed = await page.$$eval('#head-lens-followed tbody tr', (rows) =>
    rows.map((row) => ({
      id: Number(row.dataset.id),
      token: row.querySelector('th .head-lens-token').textContent,
      cells: [...row.querySelectorAll('td')].map((td) => td.textContent),
    })),
  );
  assert.equal(followed.length, 2);
  r.followed.forEach((t, i) => {
    assert.equal(followed[i].id, t.id);
    assert.equal(followed[i].token, lensToken(t.text));
    assert.equal(followed[i].cells[0], signedEffect(t.logit));
    assert.ok(followed[i].cells[1].startsWith(`${t.rank + 1} of ${model.vocab_size}`), followed[i].cells[1]);
    assert.equal(followed[i].cells[2], t.model_logit.toFixed(2));
  });
  for (const [id, list] of [
    ['#head-lens-promoted', r.promoted],
    ['#head-lens-suppressed', r.suppressed],
  ]) {
    const shown = await page.$$eval(`${id} li`, (items) =>
      items.map((li) => [...li.querySelectorAll('span')].map((e) => e.textContent)),
    );
    assert.deepEqual(
      shown,
      list.map((t) => [lensToken(t.text), signedEffect(t.logit)]),
      id,
    );
  }
  assert.equal(r.promoted.length, 8);
  assert.ok((await page.textContent('#head-lens-readout')).includes(r.readout));
  const read = await page.textContent('#head-lens-read');
  assert.match(read, new RegExp(`position ${r.position}\\b`));
  if (model.n_kv_head < model.n_head)
    assert.match(read, new RegExp(`key/value head ${r.kv_head + 1} \\(index ${r.kv_head}\\)`));
  return r;
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
      const { context, page, errors, headLensRequests } = await open(browser, base, viewport, 'patching');
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

      await suite.test(
        `${tag} ${size}: the clicked head's logit lens ${model.causal ? "shows the API's numbers" : 'needs a decoder, and is not asked for'}`,
        async () => {
          const layer = L - 2;
          if (!model.causal) {
            await page.waitForSelector('#head-lens[data-state="encoder"]', { timeout: 30000 });
            assert.match(
              await page.textContent('#head-lens-status'),
              /is an encoder: .*the logit lens needs a decoder/,
            );
            assert.equal(await page.$$eval('#head-lens-body > *', (els) => els.length), 0);
            assert.deepEqual(headLensRequests, []);
            const refused = await post(base, '/api/head_lens', { text: 'The animal was tired.', layer: 0, head: 0 });
            assert.equal(refused.status, 400);
            assert.equal(refused.body.error.code, 'not_causal');
            return;
          }
          await checkHeadLens(page, base, model, layer, 0);
          await shot(page, '#head-lens', `${viewport.width}-head-lens`);
          // Two clicks in a row: the panel ends on the second head, whatever order the replies come in.
          await page.click(`#patch-grid .patch-cell[data-layer="${L - 1}"][data-head="1"]`);
          await page.click(`#patch-grid .patch-cell[data-layer="${L - 1}"][data-head="2"]`);
          assert.equal(await page.getAttribute('#head-lens', 'data-head'), '2');
          await checkHeadLens(page, base, model, L - 1, 2);
          // Another answer: the panel no longer shows the prompts in the boxes, and says so.
          const answer = await page.inputValue('#patch-answer');
          await page.fill('#patch-answer', ' Alice');
          await page.waitForSelector('#head-lens.stale[data-state="stale"]', { timeout: 10000 });
          assert.match(await page.textContent('#head-lens-status'), /changed since this lens was read/);
          await page.fill('#patch-answer', answer);
          assert.equal(await page.getAttribute('#head-lens', 'data-state'), 'stale');
        },
      );

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
