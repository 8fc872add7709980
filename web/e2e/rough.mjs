// The explorer's rough edges, checked on one live server per model at 1400 × 900 and 390 × 844:
// (A) the W_O walk-through fits its card and writes shapes that multiply, names multi-query and
// grouped-query attention, and keeps readable text on a phone; (B) tokens read as text in the
// page and in the exports; (C) nothing stale: the counters and "Look for" follow the box, an empty
// text dims the last result and says why, Truncate takes one click; (D) one numbering in labels,
// file names and CSVs, Compare starts from the selected head, generation steps show the row that
// produced each token and Head lines marks generated tokens; (E) refusals in plain words.
// Screenshots go to test-results/ (prefix rough-<model>-).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

/** Two-byte characters (ü, é) and a line break: byte-level tokenizers write them Ã¼, Ã©, Ċ. */
const TEXT = "Grüße from the café: it didn't open.\nThe dog chased the cat.";
/** Raw byte-level BPE marks and mojibake that must never reach a reader. */
const RAW = /[ĠĊ▁]|Ã./;
const VIEWPORTS = [
  { width: 1400, height: 900 },
  { width: 390, height: 844 },
];

const ready = (page) => page.evaluate(() => document.body.getAttribute('data-ready'));

/** Runs `action` and waits until the app has finished the refresh it caused. */
async function settle(page, action, timeout = 180000) {
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
}

async function open(page, base, query) {
  await page.goto(`${base}/?${query}`);
  await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
    timeout: 180000,
  });
}

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** The name and text of a download triggered by `click`. */
async function downloaded(page, click) {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  return { name: download.suggestedFilename(), text: fs.readFileSync(await download.path(), 'utf8') };
}

/** A size as the page writes it: 1,024. */
const size = (n) => n.toLocaleString('en');

/** A text of about `n` tokens for every tokenizer here (one short word and a space each). */
const words = (n) => Array.from({ length: n }, (_, i) => ['cat', 'dog', 'sun', 'red'][i % 4]).join(' ');

/** (A) The walk-through at one viewport: widths, shapes, the attention kind, text sizes. */
async function checkWalkThrough(page, model, viewport) {
  const m = await page.evaluate(() => {
    const panel = document.querySelector('.panel.projection').getBoundingClientRect();
    const strips = [...document.querySelectorAll('.panel.projection .vector-strip')].map((s) => {
      const r = s.getBoundingClientRect();
      return { left: r.left, right: r.right };
    });
    const svg = document.querySelector('#concat-diagram svg');
    const fonts = [...document.querySelectorAll('.panel.projection *')]
      .filter((e) => e.childNodes.length && [...e.childNodes].some((c) => c.nodeType === 3 && c.textContent.trim()))
      .map((e) => parseFloat(getComputedStyle(e).fontSize));
    return {
      scrollWidth: document.documentElement.scrollWidth,
      innerWidth,
      panel: { left: panel.left, right: panel.right },
      strips,
      // On screen, SVG text is drawn at its size × this scale.
      svgScale: svg.getBoundingClientRect().width / Number(svg.getAttribute('width')),
      svgFonts: [...svg.querySelectorAll('text')].map((t) => Number(t.getAttribute('font-size'))),
      fonts,
      diagram: document.querySelector('#concat-diagram').textContent,
      notes: document.querySelector('#concat-notes').textContent,
    };
  });
  assert.ok(m.scrollWidth <= viewport.width, `page is ${m.scrollWidth} px wide at ${viewport.width}`);
  assert.ok(m.strips.length > 2 * model.n_head, 'the walk-through has its strips');
  for (const s of m.strips)
    assert.ok(
      s.left >= m.panel.left - 1 && s.right <= m.panel.right + 1,
      `a strip ${JSON.stringify(s)} leaves its card`,
    );
  const smallestSvg = Math.min(...m.svgFonts) * m.svgScale;
  assert.ok(smallestSvg >= 8.9, `diagram text drawn at ${smallestSvg.toFixed(1)} px`);
  assert.ok(Math.min(...m.fonts) >= 10, `smallest text in the walk-through ${Math.min(...m.fonts)} px`);
  const [out, inn] = model.w_o_shape;
  const concat = model.n_head * model.d_head;
  assert.equal(inn, concat);
  assert.ok(m.diagram.includes(`T × ${size(concat)}`) && m.diagram.includes(`${size(inn)} × ${size(out)}`));
  assert.ok(m.notes.includes(`[T × ${size(inn)}] · [${size(inn)} × ${size(out)}] = [T × ${size(out)}]`), m.notes);
  assert.ok(m.notes.includes(`W_O is stored as ${size(out)} × ${size(inn)}`), m.notes);
  if (model.n_kv_head === 1) {
    assert.match(m.notes, /Multi-query attention: all \d+ heads share one K and one V/);
    assert.doesNotMatch(m.notes, /Grouped-query/);
  } else if (model.n_kv_head < model.n_head) assert.match(m.notes, /Grouped-query attention/);
  if (model.n_kv_head < model.n_head) {
    assert.ok(m.diagram.includes('KV 1') && !m.diagram.includes('KV 0'), `KV heads counted from 1: ${m.diagram}`);
    assert.doesNotMatch(await page.textContent('body'), /KV 0\b|KV head 0\b/);
  }
  const steps = await page.textContent('#decomposition');
  assert.ok(steps.includes(`[1 × ${size(inn)}] · W_Oᵀ [${size(inn)} × ${size(out)}] = ${size(out)} numbers`), steps);
}

/** (B) Tokens as text: the page, the A → B pickers and the exports. */
async function checkTokens(page, run) {
  const body = await page.evaluate(() => document.body.innerText);
  assert.doesNotMatch(body, RAW, `raw token marks in the page: ${RAW.exec(body)?.[0]}`);
  const reads = await page.textContent('#decomposition');
  assert.match(reads, /reads “/);
  await page.click('#link-search summary');
  await page.waitForSelector('#link-query option', { state: 'attached' });
  const options = await page.$$eval('#link-query option', (os) => os.map((o) => o.textContent));
  // The server's display forms, cut to 14 characters as the page cuts labels.
  const label = (t) => (t.length > 14 ? t.slice(0, 13) + '…' : t).replace(/\s+/g, ' ');
  assert.deepEqual(
    options,
    run.tokens.map((t, i) => `${i}: ${label(t.display)}`),
  );
  for (const o of options) assert.doesNotMatch(o, RAW, o);
  if (run.tokens.some((t) => /\n/.test(t.text) || t.text === 'Ċ')) assert.ok(options.some((o) => o.includes('↵')));
  const json = await downloaded(page, () => page.click('#export-json'));
  const csv = await downloaded(page, () => page.click('#export-csv'));
  for (const f of [json, csv]) assert.doesNotMatch(f.text, RAW, `${f.name}: ${RAW.exec(f.text)?.[0]}`);
  return { json, csv };
}

/** (D) One numbering in the exports: file names, the CSV's header lines and rows, the JSON. */
function checkExports({ json, csv }, model, run) {
  const lines = csv.text.split(/\r\n/);
  assert.equal(lines[1], `# model: ${model.name}`);
  assert.equal(lines[2], `# text: ${JSON.stringify(TEXT)}`);
  assert.match(lines[3], /^# numbering: layers, heads and key\/value heads counted from 1/);
  assert.equal(lines[4].split(',').slice(0, 2).join(','), 'layer,head');
  assert.equal(lines[5].split(',').slice(0, 2).join(','), '1,1', 'the first row is Layer 1, Head 1');
  assert.equal(lines.filter((l) => /^\d/.test(l)).length, model.n_layer * model.n_head);
  const parsed = JSON.parse(json.text);
  assert.match(parsed.numbering, /counted from 1/);
  assert.deepEqual([parsed.heads[0].layer, parsed.heads[0].head], [1, 1]);
  assert.deepEqual(
    parsed.tokens,
    run.tokens.map((t) => t.display),
  );
  assert.match(csv.name, new RegExp(`^headscope-${model.name}-stats-token\\.csv$`));
}

/** (C) The box: counters and "Look for" follow it, an empty text dims the views, and back. */
async function checkTyping(page) {
  const status = () => page.textContent('#run-status');
  const analysed = await status();
  assert.match(analysed, /^\d+ tokens · \d+ words/);
  // An example puts its "Look for" hint up; editing the text takes it down at once.
  await settle(page, () => page.click('.chip[data-example]'));
  assert.match(await page.textContent('.sentence .hint'), /^Look for: /);
  await page.focus('#text-input');
  await page.keyboard.press('End');
  await page.keyboard.type(' And more');
  assert.equal((await page.textContent('.sentence .hint')).trim(), '', 'the hint follows the box');
  assert.equal(await page.evaluate(() => document.body.classList.contains('stale')), true, 'old views dimmed');
  await page.waitForFunction(() => /words typed/.test(document.getElementById('run-status').textContent), null, {
    timeout: 20000,
  });
  const typed = await status();
  const expected = await page.evaluate(
    async (text) => {
      const r = await (
        await fetch('/api/tokenize', {
          method: 'POST',
          headers: { 'Content-Type': 'application/json' },
          body: JSON.stringify({ text }),
        })
      ).json();
      return r.n_tokens;
    },
    (await page.inputValue('#text-input')).trim(),
  );
  assert.ok(typed.startsWith(`${expected} tokens · `), `${typed} (tokenizer: ${expected})`);
  // An empty box: the views stay dimmed and the status says why.
  await page.fill('#text-input', '');
  await page.click('#analyse');
  assert.match(await status(), /The box is empty/);
  assert.equal(await page.evaluate(() => document.body.classList.contains('stale')), true);
  const opacity = await page.$eval('#views', (e) => Number(getComputedStyle(e).opacity));
  assert.ok(opacity < 0.5, `the last result is dimmed (opacity ${opacity})`);
  // Back to a text: analysed, no longer dimmed.
  await page.fill('#text-input', TEXT);
  await settle(page, () => page.click('#analyse'));
  assert.equal(await page.evaluate(() => document.body.classList.contains('stale')), false);
  assert.match(await status(), /^\d+ tokens · \d+ words/);
}

/** (C) Truncate: a text over the server's byte limit fits in one click. */
async function checkTruncate(page, base, model) {
  const long = words(Math.ceil(model.limits.max_text_bytes / 4) + 100);
  await page.fill('#text-input', long);
  await settle(page, () => page.click('#analyse'));
  assert.equal(await page.isVisible('#truncate'), true);
  await settle(page, () => page.click('#truncate'));
  const kept = await page.inputValue('#text-input');
  const run = (await post(base, '/api/run', { text: kept })).body;
  assert.equal(run.truncated, false, 'one click: the kept text is read whole');
  assert.ok(run.n_tokens <= model.limits.max_tokens && run.n_tokens >= model.limits.max_tokens - 2, run.n_tokens);
  assert.equal(await page.isVisible('#truncate'), false);
}

/** (E) Importance on a text too long for it: plain words, the way out, no button that fails. */
async function checkImportanceRefusal(page, base, model) {
  const heads = model.n_layer * model.n_head;
  const max = Math.floor(16384 / heads);
  if (max >= model.limits.max_tokens) return false; // this server cannot take a text that long
  const text = words(max + 2);
  const refused = await post(base, '/api/importance', { text, truncate: true });
  assert.equal(refused.status, 413);
  assert.equal(refused.body.error.code, 'text_too_long');
  // The page's translation reads these numbers from the server's message.
  assert.match(refused.body.error.message, /the text is \d+ tokens; at most \d+ are allowed/);
  await page.fill('#text-input', text);
  await settle(page, () => page.click('#analyse'));
  assert.equal(await page.$('#measure-importance'), null, 'no button that would be refused');
  assert.equal(await page.$('#why-measure'), null);
  const said = await page.textContent('#importance-unavailable');
  assert.match(said, new RegExp(`up to ${max} tokens; this text has \\d+\\. Shorten it`));
  assert.doesNotMatch(await page.textContent('body'), /limits::|kMax/);
  return true;
}

/**
 * tag: a short name for screenshots ("minilm", "smollm2", "gemma"); truncate: run the one-click
 * truncation check (a 64 KiB text); generate: run the generation-step check in the page.
 */
export async function roughTests(base, suite, outDir, { tag, truncate = false, generate = false }) {
  const model = await (await fetch(base + '/api/model')).json();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    for (const viewport of VIEWPORTS) {
      const size = `${viewport.width}x${viewport.height}`;
      const context = await browser.newContext({
        viewport,
        acceptDownloads: true,
        deviceScaleFactor: 1,
        ...(viewport.width < 500 ? { isMobile: true, hasTouch: true } : {}),
      });
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      const shot = (name, el) =>
        (el ? page.locator(el) : page).screenshot({ path: path.join(outDir, `rough-${tag}-${size}-${name}.png`) });
      await open(page, base, `text=${encodeURIComponent(TEXT)}`);

      await suite.test(`${tag} ${size}: (A) the W_O walk-through fits its card and its shapes multiply`, async () => {
        await page.$eval('.panel.projection', (e) => e.scrollIntoView({ block: 'start' }));
        await checkWalkThrough(page, model, viewport);
        await shot('wo-walk-through', '.panel.projection');
      });

      await suite.test(`${tag} ${size}: (B) tokens read as text in the page, the pickers and the exports`, async () => {
        const run = (await post(base, '/api/run', { text: TEXT })).body;
        checkExports(await checkTokens(page, run), model, run);
        await page.$eval('#link-search', (e) => e.scrollIntoView({ block: 'center' }));
        await shot('tokens');
      });

      await suite.test(`${tag} ${size}: (D) labels count from 1; Compare starts from the selected head`, async () => {
        const layer = Math.min(1, model.n_layer - 1),
          head = Math.min(2, model.n_head - 1);
        // (at 1400 px the layer is chosen with buttons, and the select is out of sight)
        await settle(page, () => page.selectOption('#layer-select', String(layer), { force: true }));
        await settle(page, () => page.selectOption('#head-select', String(head), { force: true }));
        const png = await downloaded(page, () => page.click('#head-export-png'));
        assert.match(png.name, new RegExp(`-layer${layer + 1}-head${head + 1}\\.png$`), png.name);
        await settle(page, () => page.click('.tab[data-view="compare"]'));
        assert.match(
          await page.textContent('.compare-fig[data-panel="a"]'),
          new RegExp(`^A: Layer ${layer + 1}, Head ${head + 1} – `),
        );
        const params = new URL(page.url()).searchParams;
        assert.equal(params.get('a'), `${layer}.${head}`);
        const svg = await downloaded(page, () => page.click('#export-svg'));
        assert.match(svg.name, new RegExp(`-compare-layer${layer + 1}-head${head + 1}-vs-`), svg.name);
        await shot('compare');
        await settle(page, () => page.click('.tab[data-view="layer"]'));
      });

      await suite.test(`${tag} ${size}: (C) counters, "Look for" and the views follow the box`, async () => {
        await checkTyping(page);
        await shot('typing');
      });

      if (truncate && viewport.width > 500)
        await suite.test(`${tag} ${size}: (C) Truncate fits a text over the byte limit in one click`, async () => {
          await checkTruncate(page, base, model);
          await shot('truncated');
          await page.fill('#text-input', TEXT);
          await settle(page, () => page.click('#analyse'));
        });

      if (viewport.width > 500)
        await suite.test(
          `${tag} ${size}: (E) importance on a text too long for it says so in plain words`,
          async () => {
            if (await checkImportanceRefusal(page, base, model)) {
              await page.$eval('#importance-unavailable', (e) => e.scrollIntoView({ block: 'center' }));
              await shot('importance-refused');
            }
            await page.fill('#text-input', TEXT);
            await settle(page, () => page.click('#analyse'));
          },
        );

      if (generate && viewport.width > 500)
        await suite.test(`${tag} ${size}: (D) a step shows the row that produced its token; ✦ marks them`, async () => {
          const prompt = 'The capital of France is';
          await page.fill('#text-input', prompt);
          await settle(page, () => page.click('#analyse'));
          await settle(page, () => page.click('#generate'));
          await page.waitForSelector('#step-slider');
          const g = (await post(base, '/api/generate', { text: prompt, max_new_tokens: 16 })).body;
          const first = g.generated[0].position;
          const params = new URL(page.url()).searchParams;
          assert.equal(Number(params.get('lock')), first - 1, 'the query before the first generated token');
          assert.match(
            await page.textContent('#step-label'),
            new RegExp(`at position ${first}, produced by the row of`),
          );
          await settle(page, () => page.click('.tab[data-view="lines"]'));
          assert.equal(Number(await page.getAttribute('#lines-canvas', 'data-generated')), g.generated.length);
          assert.match(
            await page.textContent('#lines-note'),
            new RegExp(`✦ marks the ${g.generated.length} generated`),
          );
          await shot('generated-lines');
          await settle(page, () => page.click('.tab[data-view="layer"]'));
        });

      await suite.test(`${tag} ${size}: no page errors`, async () => {
        await shot('page');
        assert.deepEqual(errors, []);
      });
      await context.close();
    }
  } finally {
    await browser.close();
  }
}
