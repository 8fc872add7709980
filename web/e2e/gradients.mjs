// The gradient side of the Patching view in Chromium against one live server, at 1400 × 900 and on
// a 390 × 844 phone: method "both" draws the exact map and attribution patching's estimate side by
// side (stacked on the phone) on one colour scale, each holding the API's numbers, with the
// agreement line (Spearman's ρ, the shared top 10) and the misranked sites; "attribution" alone
// draws one estimated map with its note, and on a decoder the strongest estimated edges (the API's
// top 10 by |value|), while an encoder gets the edges switch disabled with the reason and sends no
// edge request (the API refuses one with 400); saliency colours each token of the clean prompt with
// the API's scores and shows the completeness gap (integrated gradients) or says there is none
// (gradient × input); a second click wins over the first, an edit dims the colours, and a decoder's
// empty answer boxes are filled with the model's two likeliest next tokens.
// Decoders patch their last two layers only. Screenshots: test-results/60-<tag>-*.png.
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

async function open(browser, base, viewport) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  // Every POST /api/patch body the page sends.
  const patches = [];
  page.on('request', (r) => {
    if (new URL(r.url()).pathname === '/api/patch') patches.push(JSON.parse(r.postData() ?? '{}'));
  });
  await page.goto(`${base}/?view=patching`);
  await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
    timeout: 120000,
  });
  await page.waitForSelector('#patch-count[data-match="true"]', { timeout: 30000 });
  return { context, page, errors, patches };
}

/** Runs the sweep in the page with `method` and waits for its result. */
async function runSweep(page, method, layers, edges = false) {
  await page.selectOption('#patch-site', 'head');
  await page.selectOption('#patch-method', method);
  await page.fill('#patch-layers', layers);
  if (method !== 'exact' && (await page.isEnabled('#patch-edges-toggle')))
    await page.setChecked('#patch-edges-toggle', edges);
  await page.click('#patch-run');
  await page.waitForFunction(() => document.querySelector('.patching-view')?.dataset.state !== 'running', null, {
    timeout: 180000,
  });
  const state = await page.$eval('.patching-view', (el) => el.dataset.state);
  if (state !== 'ready') throw new Error(`the sweep ended in "${state}": ${await page.textContent('#patch-status')}`);
}

/** The sweep request as the API takes it, from the fields shown. */
async function requestShown(page, model, layers, method, edges = false) {
  const r = {
    clean: await page.inputValue('#patch-clean'),
    corrupt: await page.inputValue('#patch-corrupt'),
    sites: ['head'],
    direction: await page.inputValue('#patch-direction'),
    metric: await page.inputValue('#patch-metric'),
    method,
  };
  if (model.causal)
    Object.assign(r, { answer: await page.inputValue('#patch-answer'), wrong: await page.inputValue('#patch-wrong') });
  if (layers.length) r.layers = layers;
  if (edges) r.edges = true;
  return r;
}

/** The cells of one grid: layer, head and normalised effect of those patched. */
async function gridCells(page, id) {
  return page.$$eval(`${id} .patch-cell`, (els) =>
    els.map((e) => ({
      layer: Number(e.dataset.layer),
      head: Number(e.dataset.head),
      n: e.dataset.normalised,
      empty: e.classList.contains('empty'),
    })),
  );
}

/** Asserts that a grid of n_layer × n_head cells holds `results`' normalised effects. */
function assertGrid(cells, results, L, H, what) {
  assert.equal(cells.length, L * H, what);
  assert.equal(cells.filter((c) => !c.empty).length, results.length, what);
  for (const e of results) {
    const c = cells[e.layer * H + e.head];
    assert.deepEqual([c.layer, c.head], [e.layer, e.head]);
    assert.equal(Number(c.n), e.normalised, `${what}: L${e.layer} H${e.head}`);
  }
}

/** The page's name of an edge: "L1 H2 → L3 H4 (its keys)", "L24 H4 → the logits". */
function edgeName(e) {
  const from = `L${e.sender[0] + 1} H${e.sender[1] + 1}`;
  if (!e.receiver) return `${from} → the logits`;
  const input = { q: 'queries', k: 'keys', v: 'values' }[e.input];
  return `${from} → L${e.receiver[0] + 1} H${e.receiver[1] + 1} (its ${input})`;
}

/** Waits until the saliency panel settles; throws with its status unless it is ready. */
async function waitForSaliency(page) {
  await page.waitForFunction(() => document.querySelector('#saliency')?.dataset.state !== 'running', null, {
    timeout: 180000,
  });
  const state = await page.getAttribute('#saliency', 'data-state');
  if (state !== 'ready') throw new Error(`saliency ended in "${state}": ${await page.textContent('#saliency-status')}`);
}

/** The saliency request as the API takes it, from the fields shown. */
async function saliencyShown(page, model) {
  const method = await page.inputValue('#saliency-method');
  const r = { text: await page.inputValue('#patch-clean'), method };
  r.metric = model.causal ? await page.inputValue('#patch-metric') : 'cosine';
  if (method === 'integrated_gradients') r.steps = Number(await page.inputValue('#saliency-steps'));
  if (model.causal)
    Object.assign(r, { answer: await page.inputValue('#patch-answer'), wrong: await page.inputValue('#patch-wrong') });
  else r.reference = await page.inputValue('#saliency-reference');
  return r;
}

/** The horizontal overflow of the page (a phone must not scroll sideways). */
async function overflow(page) {
  return page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
}

export async function gradientsTests(base, suite, outDir, { tag }) {
  const model = await (await fetch(base + '/api/model')).json();
  const L = model.n_layer,
    H = model.n_head;
  // Decoders: the last two layers (page numbering), so that the exact sweep is a few seconds.
  const layersText = model.causal ? `${L - 1}-${L}` : '';
  const layers = model.causal ? [L - 2, L - 1] : [];
  const shot = async (page, selector, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: path.join(outDir, `60-${tag}-${name}.png`) });
    await unstick.evaluate((e) => e.remove());
  };
  // The stretch of the page from the top of one element to the bottom of another.
  const shotSpan = async (page, from, to, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.$eval(from, (e) => e.scrollIntoView({ block: 'start' }));
    const a = await page.locator(from).boundingBox();
    const b = await page.locator(to).boundingBox();
    const { width, height } = page.viewportSize();
    const clip = { x: 0, y: a.y, width, height: Math.min(b.y + b.height, height) - a.y };
    await page.screenshot({ path: path.join(outDir, `60-${tag}-${name}.png`), clip });
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
      const wide = viewport.width > 500;
      const { context, page, errors, patches } = await open(browser, base, viewport);

      await suite.test(
        `${tag} ${size}: "both" draws the exact and the estimated map with their agreement`,
        async () => {
          await runSweep(page, 'both', layersText);
          const api = await post(base, '/api/patch', await requestShown(page, model, layers, 'both'));
          assert.equal(api.status, 200, JSON.stringify(api.body));
          const r = api.body;
          assert.equal(r.method, 'both');
          assertGrid(await gridCells(page, '#patch-grid'), r.results, L, H, 'exact');
          assertGrid(await gridCells(page, '#patch-grid-estimate'), r.attribution.results, L, H, 'estimate');
          // One colour scale for both maps.
          const limits = await page.$$eval('.patch-maps .effect-grid', (els) => els.map((e) => e.dataset.limit));
          assert.equal(limits.length, 2);
          assert.equal(limits[0], limits[1]);
          assert.equal(await page.textContent('#patch-map-exact-title'), 'Exact patching');
          assert.match(await page.textContent('.patching-view .legend figcaption'), /both maps: normalised effect/);
          // Side by side on the wide screen, one above the other on the phone.
          const a = await page.locator('#patch-map-exact').boundingBox();
          const b = await page.locator('#patch-map-estimate').boundingBox();
          if (wide) {
            assert.ok(Math.abs(a.y - b.y) < 2, `the maps start at ${a.y} and ${b.y}`);
            assert.ok(b.x >= a.x + a.width - 1, 'the estimate is to the right of the exact map');
          } else {
            assert.ok(b.y >= a.y + a.height - 1, 'the estimate is below the exact map');
            assert.ok((await overflow(page)) <= 1, 'the page is wider than the phone');
          }
          // The agreement: the API's numbers, in words.
          const g = r.agreement;
          assert.equal(Number(await page.getAttribute('#patch-agreement', 'data-spearman')), g.spearman);
          const line = await page.textContent('#patch-agreement-line');
          assert.ok(line.includes(`Spearman ρ ${g.spearman.toFixed(3)}`), line);
          assert.ok(line.includes(`Pearson r ${g.pearson.toFixed(3)}`), line);
          assert.ok(line.includes(`${g.top10_shared} of the exact top ${Math.min(10, g.sites)}`), line);
          assert.ok(line.includes(`${g.sites} sites`), line);
          // The misranked sites: among the API's, each with two different ranks.
          const listed = await page.$$eval('#patch-misranked li', (els) =>
            els.map((e) => ({ layer: Number(e.dataset.layer), head: Number(e.dataset.head), text: e.textContent })),
          );
          if (listed.length === 0) assert.ok(await page.isVisible('#patch-misranked-none'));
          for (const m of listed) {
            assert.ok(
              g.misranked.some((x) => x.layer === m.layer && x.head === m.head),
              `L${m.layer} H${m.head} is not one the API names`,
            );
            const ranks = /exact rank ([\d.]+) .* estimate rank ([\d.]+)/.exec(m.text);
            assert.ok(ranks && ranks[1] !== ranks[2], m.text);
          }
          await shot(page, '#patch-result', `${viewport.width}-both`);
        },
      );

      await suite.test(
        `${tag} ${size}: "attribution" alone draws the estimated map with its note${model.causal ? ' and the strongest edges' : ''}`,
        async () => {
          await runSweep(page, 'attribution', '', model.causal);
          const api = await post(base, '/api/patch', await requestShown(page, model, [], 'attribution', model.causal));
          assert.equal(api.status, 200, JSON.stringify(api.body));
          assertGrid(await gridCells(page, '#patch-grid'), api.body.results, L, H, 'attribution');
          assert.equal(await page.isVisible('#patch-map-estimate'), false);
          assert.equal(await page.isVisible('#patch-agreement'), false);
          assert.equal(await page.textContent('#patch-map-exact-title'), 'Estimate (attribution patching)');
          const note = await page.textContent('#patch-method-note');
          assert.match(note, /first-order estimate/);
          assert.match(note, /One backward pass gives every site at once/);
          assert.match(await page.textContent('#patch-summary'), /estimated from \d+ forward and 1 backward pass/);
          if (model.causal) {
            const all = api.body.attribution.edges;
            assert.ok(all.length > 10);
            const top = [...all].sort((x, y) => Math.abs(y.value) - Math.abs(x.value)).slice(0, 10);
            const shown = await page.$$eval('#patch-edge-list li', (els) =>
              els.map((e) => ({
                value: Number(e.dataset.value),
                name: e.querySelector('.patch-site-name').textContent,
              })),
            );
            assert.equal(shown.length, 10);
            shown.forEach((s, i) => {
              assert.equal(Math.abs(s.value), Math.abs(top[i].value), `edge ${i + 1}`);
              if (s.value === top[i].value) assert.equal(s.name, edgeName(top[i]));
            });
            assert.equal(Number(await page.getAttribute('#patch-edges', 'data-count')), all.length);
            await shot(page, '#patch-edges', `${viewport.width}-edges`);
          } else {
            // An encoder: the edges switch is disabled, says why, and no edge is ever asked for.
            assert.equal(await page.isDisabled('#patch-edges-toggle'), true);
            const why = await page.textContent('#patch-edges-note');
            assert.match(why, /Edges need a decoder: .* is a post-norm encoder/);
            assert.ok(await page.isVisible('#patch-edges-note'));
            assert.equal(await page.isVisible('#patch-edges'), false);
            assert.ok(patches.length > 0 && patches.every((p) => !p.edges), JSON.stringify(patches));
            const refused = await post(base, '/api/patch', {
              ...(await requestShown(page, model, [], 'attribution')),
              edges: true,
            });
            assert.equal(refused.status, 400);
            assert.match(refused.body.error.message, /post-norm encoder/);
            await shotSpan(page, '#patch-controls', '#patch-edges-note', `${viewport.width}-edges-refused`);
          }
          if (!wide) assert.ok((await overflow(page)) <= 1, 'the page is wider than the phone');
        },
      );

      await suite.test(`${tag} ${size}: saliency colours each token and shows the completeness gap`, async () => {
        const ig = wide;
        await page.selectOption('#saliency-method', ig ? 'integrated_gradients' : 'grad_x_input');
        if (ig) await page.selectOption('#saliency-steps', '10');
        assert.equal(await page.isVisible('#saliency-steps'), ig);
        assert.equal(await page.isVisible('#saliency-reference'), !model.causal);
        await page.click('#saliency-run');
        await waitForSaliency(page);
        const api = await post(base, '/api/saliency', await saliencyShown(page, model));
        assert.equal(api.status, 200, JSON.stringify(api.body));
        const r = api.body;
        const tokens = await page.$$eval('#saliency-tokens .saliency-token', (els) =>
          els.map((e) => ({ score: e.dataset.score, background: getComputedStyle(e).backgroundColor })),
        );
        assert.equal(tokens.length, r.tokens.length);
        r.tokens.forEach((t, i) => assert.equal(Number(tokens[i].score), t.score, `token ${i}`));
        assert.ok(new Set(tokens.map((t) => t.background)).size >= 3, 'the tokens are coloured by score');
        // The strongest token carries an end of the scale: far from white.
        const strongest = r.tokens.reduce((m, t, i) => (Math.abs(t.score) > Math.abs(r.tokens[m].score) ? i : m), 0);
        const [cr, cg, cb] = tokens[strongest].background.match(/\d+/g).map(Number);
        assert.ok(Math.min(cr, cg, cb) < 200, `the strongest token is ${tokens[strongest].background}`);
        assert.match(await page.textContent('#saliency-result .legend figcaption'), /^score \(blue: .*red: /);
        const gap = await page.textContent('#saliency-gap');
        if (ig) {
          assert.equal(Number(await page.getAttribute('#saliency-gap', 'data-gap')), r.completeness_gap);
          assert.match(gap, /^Completeness gap -?[\d.e-]+ .*the scores should add up to the metric at the text minus/);
        } else assert.match(gap, /no completeness gap/);
        assert.match(await page.textContent('#saliency-summary'), /the scores add up to/);
        if (!wide) assert.ok((await overflow(page)) <= 1, 'the page is wider than the phone');
        await shot(page, '#saliency', `${viewport.width}-saliency`);
      });

      if (wide)
        await suite.test(
          `${tag} ${size}: saliency keeps the later click and dims when the prompt changes`,
          async () => {
            await page.selectOption('#saliency-method', 'grad_x_input');
            await page.click('#saliency-run');
            await page.selectOption('#saliency-method', 'integrated_gradients');
            await page.selectOption('#saliency-steps', '25');
            await page.click('#saliency-run');
            await waitForSaliency(page);
            assert.equal(await page.getAttribute('#saliency-result', 'data-method'), 'integrated_gradients');
            assert.match(await page.textContent('#saliency-summary'), /\(25 steps\)/);
            const clean = await page.inputValue('#patch-clean');
            await page.fill('#patch-clean', clean + ' again');
            await page.waitForSelector('#saliency-result.stale', { timeout: 10000 });
            assert.equal(await page.getAttribute('#saliency', 'data-state'), 'stale');
            assert.match(await page.textContent('#saliency-status'), /changed since these colours were computed/);
            await page.fill('#patch-clean', clean);
            await page.waitForSelector('#saliency[data-state="ready"]', { timeout: 10000 });
            assert.equal(await page.$('#saliency-result.stale'), null);
            if (model.causal) {
              // A refusal in words: an answer of two tokens.
              const answer = await page.inputValue('#patch-answer');
              await page.fill('#patch-answer', ' Mary Ann');
              await page.click('#saliency-run');
              await page.waitForSelector('#saliency[data-state="error"]', { timeout: 60000 });
              assert.match(await page.textContent('#saliency-status'), /^The answer " Mary Ann" is 2 tokens/);
              await page.fill('#patch-answer', answer);
            } else {
              await page.fill('#saliency-reference', '');
              await page.click('#saliency-run');
              await page.waitForSelector('#saliency[data-state="error"]', { timeout: 10000 });
              assert.match(await page.textContent('#saliency-status'), /Write a reference text/);
            }
          },
        );

      if (wide && model.causal)
        await suite.test(`${tag} ${size}: empty answer boxes take the model's two likeliest next tokens`, async () => {
          await page.fill('#patch-answer', '');
          await page.fill('#patch-wrong', '');
          await page.click('#saliency-run');
          await waitForSaliency(page);
          const text = await page.inputValue('#patch-clean');
          const lens = await post(base, '/api/logit_lens', { text, truncate: true, top_k: 3, tokens: [] });
          assert.equal(lens.status, 200);
          const top = lens.body.layers[L].top.map((t) => t.text);
          assert.equal(await page.inputValue('#patch-answer'), top[0]);
          assert.equal(await page.inputValue('#patch-wrong'), top[1]);
          assert.match(await page.textContent('#saliency-filled'), /The answer boxes were empty: they now hold/);
          const api = await post(base, '/api/saliency', await saliencyShown(page, model));
          assert.equal(api.status, 200);
          assert.equal(
            Number(await page.$eval('#saliency-tokens .saliency-token', (e) => e.dataset.score)),
            api.body.tokens[0].score,
          );
        });
      assert.deepEqual(errors, []);
      await context.close();
    }
  } finally {
    await browser.close();
  }
}
