// A short second pass on a causal model with grouped-query attention (SmolLM2-135M: 9 query
// heads sharing 3 KV heads): the API's head map, and the explorer's KV-group frames, causal-mask
// hatching and W_O diagram labels in Chromium.
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

/** Llama's map (transformers' repeat_kv): query head h reads KV head floor(h / (n_head / n_kv)). */
function expectedMap(nHead, nKv) {
  return Array.from({ length: nHead }, (_, h) => Math.floor(h / (nHead / nKv)));
}

export async function decoderTests(base, suite, outDir, tag = '', { generateInPage = true } = {}) {
  const shot = (name) => path.join(outDir, tag ? `${tag}-${name}` : name);
  let model;
  await suite.test('/api/model reports a causal model and its query → KV head map', async () => {
    model = await (await fetch(base + '/api/model')).json();
    assert.equal(model.causal, true);
    assert.ok(model.n_kv_head < model.n_head, `n_kv_head ${model.n_kv_head} < n_head ${model.n_head}`);
    assert.deepEqual(model.kv_head_of, expectedMap(model.n_head, model.n_kv_head));
  });
  if (!model) return;

  const post = (p, body) =>
    fetch(base + p, { method: 'POST', headers: { 'Content-Type': 'application/json' }, body: JSON.stringify(body) });
  const PROMPT = 'The capital of France is';
  await suite.test('/api/generate continues the prompt greedily; the text re-encodes to the same ids', async () => {
    const res = await post('/api/generate', { text: PROMPT, max_new_tokens: 6 });
    assert.equal(res.status, 200);
    const g = await res.json();
    const run = await (await post('/api/run', { text: PROMPT })).json();
    assert.equal(g.prompt_tokens, run.n_tokens);
    assert.deepEqual(
      g.ids.slice(0, g.prompt_tokens),
      run.tokens.map((t) => t.id),
    );
    assert.ok(g.generated.length >= 1 && g.generated.length <= 6);
    assert.deepEqual(
      g.generated.map((s) => s.position),
      g.generated.map((_, i) => g.prompt_tokens + i),
    );
    assert.deepEqual(
      g.ids.slice(g.prompt_tokens),
      g.generated.map((s) => s.id),
    );
    assert.equal(g.text, PROMPT + g.continuation);
    assert.ok(g.continuation.length > 0);
    if (g.retokenizes_same) {
      const full = await (await post('/api/run', { text: g.text })).json();
      assert.deepEqual(
        full.tokens.map((t) => t.id),
        g.ids,
      );
    }
    // Greedy decoding is deterministic: the same request gives the same ids.
    const again = await (await post('/api/generate', { text: PROMPT, max_new_tokens: 6 })).json();
    assert.deepEqual(again.ids, g.ids);
    const bad = await post('/api/generate', { text: PROMPT, max_new_tokens: 33 });
    assert.equal(bad.status, 400);
    assert.equal((await bad.json()).error.code, 'bad_max_new_tokens');
  });
  const perGroup = model.n_head / model.n_kv_head;
  const labels = Array.from(
    { length: model.n_kv_head },
    (_, g) => `KV head ${g + 1}: heads ${g * perGroup + 1}–${(g + 1) * perGroup}`,
  );

  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const page = await (
    await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 })
  ).newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  const part = async (selector, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: shot(name) });
    await unstick.evaluate((e) => e.remove());
  };
  try {
    await suite.test('layer view frames the query heads of each KV head, and hatches the causal mask', async () => {
      await page.goto(base + '/?text=' + encodeURIComponent('The cat sat on the mat because it was warm.'));
      await page.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 120000 });
      const groups = await page.$$eval('#head-grid .kv-group', (els) =>
        els.map((g) => ({
          label: g.querySelector('.kv-group-label').textContent,
          heads: [...g.querySelectorAll('.head-tile')].map((t) => Number(t.dataset.head)),
        })),
      );
      assert.equal(groups.length, model.n_kv_head);
      groups.forEach((g, i) => {
        assert.ok(g.label.startsWith(labels[i]), `"${g.label}" starts with "${labels[i]}"`);
        assert.deepEqual(
          g.heads,
          model.kv_head_of.map((kv, h) => (kv === i ? h : -1)).filter((h) => h >= 0),
        );
      });
      assert.equal(await page.textContent('.layer-view .legend-masked'), 'masked (future token)');
      // Top-right cell of head 0 (query 0, the last key) is masked: a grey, equal channels ± a few.
      const [r, g, b] = await page.$eval('#head-grid .head-tile[data-head="0"] canvas', (c) => {
        const w = c.width;
        return [...c.getContext('2d').getImageData(w - 3, 2, 1, 1).data];
      });
      assert.ok(
        Math.max(r, g, b) - Math.min(r, g, b) <= 16 && r < 220 && r > 100,
        `masked cell is grey, got rgb(${r}, ${g}, ${b})`,
      );
      await part('.layer-view', '20-decoder-kv-groups.png');
    });

    await suite.test('W_O diagram and model overview name the KV groups', async () => {
      const diagram = await page.textContent('#concat-diagram');
      for (let g = 1; g <= model.n_kv_head; g++) assert.ok(diagram.includes(`KV ${g}`), `KV ${g} under its heads`);
      const notes = await page.textContent('#concat-notes');
      // One key/value head for all query heads is multi-query attention; fewer, grouped-query.
      if (model.n_kv_head === 1)
        assert.match(notes, new RegExp(`Multi-query attention: all ${model.n_head} heads share one K and one V`));
      else {
        assert.match(notes, /Grouped-query attention/);
        for (const l of labels) assert.ok(notes.includes(`${l} share one K and one V`), l);
      }
      await part('.panel.projection', '21-decoder-wo-groups.png');
      await page.click('.tab[data-view="model"]');
      await page.waitForSelector('#model-kv-groups:not([hidden])', { timeout: 120000 });
      const note = await page.textContent('#model-kv-groups');
      for (const l of labels) assert.ok(note.includes(l), l);
      await part('.model-view', '22-decoder-model-overview.png');
    });

    if (generateInPage)
      await suite.test(
        'Generate appends tokens; the step slider locks the query that produced each generated token',
        async () => {
          await page.click('.tab[data-view="lines"]');
          await page.fill('#text-input', PROMPT);
          const ready = () => page.evaluate(() => document.body.getAttribute('data-ready'));
          let before = await ready();
          await page.click('#analyse');
          await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, {
            timeout: 120000,
          });
          before = await ready();
          await page.click('#generate');
          await page.waitForFunction(
            (b) => {
              const v = document.body.getAttribute('data-ready');
              return v !== b && !v.startsWith('error');
            },
            before,
            { timeout: 120000 },
          );
          await page.waitForSelector('#step-slider', { timeout: 120000 });
          const g = await (await post('/api/generate', { text: PROMPT, max_new_tokens: 16 })).json();
          assert.equal(await page.inputValue('#text-input'), g.text);
          assert.equal(Number(await page.getAttribute('#step-slider', 'max')), g.generated.length - 1);
          const step = Math.min(2, g.generated.length - 1);
          before = await ready();
          await page.$eval(
            '#step-slider',
            (el, v) => {
              el.value = String(v);
              el.dispatchEvent(new Event('input', { bubbles: true }));
            },
            step,
          );
          await page.waitForFunction((b) => document.body.getAttribute('data-ready') !== b, before, {
            timeout: 120000,
          });
          const q = new URL(page.url()).searchParams;
          // The step's row is the one that produced its token: the query one position before it.
          assert.equal(Number(q.get('token')), g.generated[step].position - 1);
          assert.equal(Number(q.get('lock')), g.generated[step].position - 1);
          assert.ok((await page.textContent('#step-label')).includes(`${step + 1} of ${g.generated.length}`));
          await part('.sentence', '23-decoder-generate-steps.png');
          assert.deepEqual(pageErrors, []);
        },
      );
  } finally {
    await browser.close();
  }
}

/** Whether (r, g, b) is one of the hatching greys (equal channels ± a few, mid-light). */
function isHatchGrey([r, g, b]) {
  return Math.max(r, g, b) - Math.min(r, g, b) <= 16 && r < 220 && r > 100;
}

/**
 * A model with sliding-window layers (Gemma 3: five local layers of 512 keys to one global): on a
 * text longer than the window, a local layer hatches the keys its last queries cannot see, as it
 * hatches future keys, and says so in the legend and tooltip; a global layer does not.
 */
export async function windowTests(base, suite, outDir, text) {
  const model = await (await fetch(base + '/api/model')).json();
  const local = model.window.findIndex((w) => w > 0),
    global = model.window.findIndex((w) => w === 0);
  await suite.test('/api/model gives every layer its sliding window', async () => {
    assert.equal(model.window.length, model.n_layer);
    assert.ok(local >= 0 && global >= 0, `local and global layers in ${JSON.stringify(model.window)}`);
  });
  if (local < 0 || global < 0) return;
  const run = await (
    await fetch(base + '/api/run', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ text, truncate: true }),
    })
  ).json();
  const W = model.window[local];
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const page = await (
    await browser.newContext({ viewport: { width: 1400, height: 1000 }, deviceScaleFactor: 1 })
  ).newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  // The pixel of head 0's tile for the last query and the first key (bottom-left corner).
  const corner = () =>
    page.$eval('#head-grid .head-tile[data-head="0"] canvas', (c) => [
      ...c.getContext('2d').getImageData(1, c.height - 2, 1, 1).data,
    ]);
  try {
    await suite.test(`a local layer hatches keys more than ${W} tokens back; a global layer does not`, async () => {
      assert.ok(run.n_tokens > W + 16, `the text has ${run.n_tokens} tokens, more than the ${W}-token window`);
      const open = async (layer) => {
        await page.goto(base + `/?view=layer&layer=${layer}&text=` + encodeURIComponent(text));
        await page.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 180000 });
        await page.waitForSelector('#head-grid .head-tile[data-head="0"] canvas');
      };
      await open(local);
      assert.equal(
        await page.textContent('.layer-view .legend-masked'),
        `masked (future token, or more than ${W} tokens back)`,
      );
      const lc = await corner();
      assert.ok(isHatchGrey(lc), `layer ${local + 1}, last query → first key is hatched, got rgb(${lc.slice(0, 3)})`);
      await page.locator('.layer-view').screenshot({ path: path.join(outDir, '24-decoder-window-local.png') });
      await open(global);
      assert.equal(await page.textContent('.layer-view .legend-masked'), 'masked (future token)');
      const gc = await corner();
      assert.ok(!isHatchGrey(gc), `layer ${global + 1} (global) shows a weight there, got rgb(${gc.slice(0, 3)})`);
      assert.deepEqual(pageErrors, []);
    });
  } finally {
    await browser.close();
  }
}
