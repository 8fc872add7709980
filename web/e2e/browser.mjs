// The explorer in Debian's Chromium (driven by playwright-core) against the live server:
// choose and type sentences, pick layers and heads, check that what is shown equals the API,
// use every view and control, export PNG/SVG/CSV/JSON, and save screenshots.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { decodeTensor } from './harness.mjs';
import { SENTENCE } from './api.mjs';

/** Chromium flags for a sandboxed machine without network (see the project's machine notes). */
export const CHROMIUM_ARGS = [
  '--headless',
  '--no-sandbox',
  '--disable-gpu',
  '--disable-quic',
  '--no-first-run',
  '--disable-background-networking',
  '--disable-component-update',
  '--disable-sync',
];

async function api(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, `${pathName}: ${res.status}`);
  return (res.headers.get('content-type') ?? '').includes('json') ? res.json() : Buffer.from(await res.arrayBuffer());
}

/** Runs `action` and waits until the app has finished the refresh it caused. */
async function settle(page, action, timeout = 120000) {
  const before = await page.evaluate(() => document.body.getAttribute('data-ready'));
  await action();
  await page.waitForFunction(
    (b) => {
      const v = document.body.getAttribute('data-ready');
      return v !== null && v !== b;
    },
    before,
    { timeout },
  );
  const state = await page.evaluate(() => document.body.getAttribute('data-ready'));
  if (state.startsWith('error')) throw new Error(`the app reported an error: ${await page.textContent('#run-status')}`);
}

function params(page) {
  return new URL(page.url()).searchParams;
}

const FORMAT = {
  entropy_bits: (v) => v.toFixed(2),
  sparsity: (v) => `${(v * 100).toFixed(0)} %`,
  max_attention: (v) => v.toFixed(2),
  avg_attention: (v) => v.toFixed(2),
};

/** The head panel shows exactly the API's numbers for (layer, head) at `level`. */
async function checkHeadPanel(page, base, text, level, layer, head, special = 'keep') {
  const run = await api(base, '/api/run', { text, level, special });
  const report = run.heads[layer * 12 + head];
  const title = await page.textContent('#head-title');
  assert.ok(
    title.startsWith(`Head ${head + 1} (index ${head}) – ${report.roles.primary.name}`),
    `title "${title}" for role ${report.roles.primary.name}`,
  );
  const shown = await page.$$eval('#head-stats [data-stat]', (els) =>
    els.map((e) => ({
      key: e.getAttribute('data-stat'),
      value: e.getAttribute('data-value'),
      text: e.querySelector('.stat-value').textContent,
    })),
  );
  assert.deepEqual(
    shown.map((s) => s.key),
    ['entropy_bits', 'sparsity', 'max_attention', 'avg_attention'],
  );
  for (const s of shown) {
    assert.equal(Number(s.value), report.stats[s.key], `${s.key}: page ${s.value}, API ${report.stats[s.key]}`);
    assert.equal(s.text, FORMAT[s.key](report.stats[s.key]), `${s.key} is displayed as ${s.text}`);
  }
  const description = await page.textContent('#head-description');
  assert.ok(
    description.toLowerCase().includes(report.roles.primary.evidence.toLowerCase().replace(/\.$/, '')),
    'the description quotes the measured evidence',
  );
  const fn = await page.textContent('#head-function');
  const role = (await (await fetch(base + '/api/model')).json()).roles.find((r) => r.id === report.roles.primary.id);
  assert.ok(fn.startsWith(role.typical_function.slice(0, 40)), 'typical function of the role');
  return report;
}

export function pngSize(file) {
  const b = fs.readFileSync(file);
  assert.equal(b.toString('latin1', 1, 4), 'PNG', `${file} is a PNG`);
  return { width: b.readUInt32BE(16), height: b.readUInt32BE(20) };
}

function luminance(rgb) {
  const [r, g, b] = rgb.map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

export async function browserTests(base, suite, outDir) {
  // playwright starts the browser with a fresh, empty profile directory of its own.
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const context = await browser.newContext({
    viewport: { width: 1400, height: 1000 },
    acceptDownloads: true,
    deviceScaleFactor: 1,
  });
  const page = await context.newPage();
  const pageErrors = [];
  page.on('pageerror', (e) => pageErrors.push(String(e)));
  page.on('console', (m) => m.type() === 'error' && pageErrors.push(m.text()));
  const shot = (name, opts = {}) => page.screenshot({ path: path.join(outDir, name), ...opts });
  /** A picture of one part of the page, with the sticky bars out of the way and no tooltip. */
  const part = async (selector, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: path.join(outDir, name) });
    await unstick.evaluate((e) => e.remove());
  };
  const timings = {};

  try {
    await suite.test('page loads the default sentence with every lesson element', async () => {
      await page.goto(base + '/');
      await page.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 120000 });
      assert.equal(await page.inputValue('#text-input'), SENTENCE);
      // Learning context: a collapsed strip (so that the views fit the first screen); opened on demand.
      assert.equal(await page.$eval('#learning-context', (d) => d.open), false);
      await page.click('#learning-context > summary');
      const cards = await page.$$eval('#learning-context .context-card h3', (els) =>
        els.map((e) => e.textContent.replace(/^\d/, '')),
      );
      assert.deepEqual(cards, [
        'Learning objectives',
        'Where we are in the transformer',
        'Why it matters',
        'Key takeaways',
      ]);
      const ctxText = await page.textContent('#learning-context');
      for (const needle of ['Step 5 of 8', 'Grouped-query attention', 'Llama 3 70B', 'feed-forward', 'W_O'])
        assert.ok(ctxText.includes(needle), needle);
      assert.equal(await page.$eval('.steps li.current', (e) => e.textContent), '5Multi-head attention');
      // Example sentences, free text, all heads of the layer, the legend.
      assert.ok((await page.$$('.sentence .chip')).length >= 5);
      assert.equal((await page.$$('#head-grid .head-tile')).length, 12);
      assert.deepEqual(await page.$$eval('.layer-view .legend-ticks span', (els) => els.map((e) => e.textContent)), [
        '0.0',
        '0.25',
        '0.5',
        '0.75',
        '1.0',
      ]);
      // The formula with this model's sizes, and the explanation.
      assert.equal(await page.textContent('#projection-title'), 'Concat(head₁, …, head₁₂) · W_O');
      const diagram = await page.textContent('#concat-diagram');
      for (const needle of ['T × 384', '384 × 384']) assert.ok(diagram.includes(needle), needle);
      const notes = await page.textContent('#concat-notes');
      for (const needle of ['T × 32', '[T × 384] · [384 × 384] = [T × 384]']) assert.ok(notes.includes(needle), needle);
      assert.ok((await page.textContent('#why-roles')).length > 20);
      await shot('01-page-top.png');
      await shot('02-page-full.png', { fullPage: true });
    });

    await suite.test('learning context collapses and opens again', async () => {
      await page.click('#learning-context > summary');
      assert.equal(await page.$eval('#learning-context', (d) => d.open), false);
      await page.click('#learning-context > summary');
      assert.equal(await page.$eval('#learning-context', (d) => d.open), true);
      await part('#learning-context', '03-learning-context.png');
    });

    await suite.test('the selected head shows the API statistics, role, description and function', async () => {
      await checkHeadPanel(page, base, SENTENCE, 'token', 0, 0);
    });

    await suite.test('choose an example sentence', async () => {
      await settle(page, () => page.click('.sentence .chip[data-example="Agreement"]'));
      const text = await page.inputValue('#text-input');
      assert.match(text, /^The keys to the old cabinet/);
      assert.equal(params(page).get('text'), text);
      await checkHeadPanel(page, base, text, 'token', 0, 0);
    });

    const typed = 'Alice gave Bob the keys because she trusted him completely.';
    await suite.test('type a new sentence', async () => {
      await page.fill('#text-input', typed);
      await settle(page, () => page.press('#text-input', 'Enter'));
      const run = await api(base, '/api/run', { text: typed });
      assert.match(await page.textContent('#run-status'), new RegExp(`^${run.n_tokens} tokens`));
      await checkHeadPanel(page, base, typed, 'token', 0, 0);
    });

    await suite.test('trophy sentence: the coreference head names the antecedent', async () => {
      const trophy = "The trophy didn't fit in the suitcase because it was too big.";
      await page.fill('#text-input', trophy);
      await settle(page, () => page.press('#text-input', 'Enter'));
      await settle(page, () => page.click('.toolbar [data-layer="3"]'));
      await settle(page, () => page.click('#head-grid [data-head="1"]'));
      assert.equal(await page.getAttribute('#head-on-text', 'data-recognised'), 'coreference');
      assert.match(await page.textContent('#head-on-text'), /'it' → 'trophy'/);
      await page.fill('#text-input', typed);
      await settle(page, () => page.press('#text-input', 'Enter'));
    });

    await suite.test('pick a layer and a head; statistics equal the API', async () => {
      await settle(page, () => page.click('.toolbar [data-layer="3"]'));
      assert.equal(await page.textContent('#layer-title'), 'Layer 4: all 12 heads side by side'); // index 3, counted from 1
      await settle(page, () => page.click('#head-grid [data-head="5"]'));
      await checkHeadPanel(page, base, typed, 'token', 3, 5);
      assert.equal(params(page).get('layer'), '3');
      assert.equal(params(page).get('head'), '5');
      await settle(page, () => page.selectOption('#head-select', '9'));
      await checkHeadPanel(page, base, typed, 'token', 3, 9);
      await part('#head-panel', '04-head-panel.png');
    });

    await suite.test('keyboard: arrows move between heads and layers', async () => {
      await page.focus('#head-grid [data-head="9"]');
      await settle(page, () => page.keyboard.press('ArrowRight'));
      await settle(page, () => page.keyboard.press('ArrowDown'));
      assert.equal(params(page).get('layer'), '4');
      assert.equal(params(page).get('head'), '10');
      await checkHeadPanel(page, base, typed, 'token', 4, 10);
      await settle(page, () => page.keyboard.press('ArrowUp'));
      await settle(page, () => page.keyboard.press('ArrowLeft'));
      assert.equal(params(page).get('layer'), '3');
      assert.equal(params(page).get('head'), '9');
    });

    await suite.test('hovering the large heatmap shows the exact weight', async () => {
      const box = await page.locator('#head-panel canvas.labeled-heatmap').boundingBox();
      await page.$eval('#head-panel', (e) => e.scrollIntoView());
      const b2 = await page.locator('#head-panel canvas.labeled-heatmap').boundingBox();
      await page.mouse.move(b2.x + b2.width * 0.8, b2.y + b2.height * 0.7);
      await page.waitForSelector('.tooltip', { state: 'visible' });
      const lines = await page.$$eval('.tooltip > *', (els) => els.map((e) => e.textContent));
      const m = /query (\d+), key (\d+)/.exec(lines.join('\n'));
      const w = /weight (\d\.\d{4})/.exec(lines.join('\n'));
      assert.ok(m && w && box, `tooltip: ${lines.join(' | ')}`);
      const att = decodeTensor(await api(base, '/api/attention', { text: typed, layer: 3, head: 9 }));
      const T = att.shape[2];
      assert.equal(att.data[Number(m[1]) * T + Number(m[2])].toFixed(4), w[1]);
      await page.mouse.move(0, 0);
    });

    await suite.test('W_O decomposition of a chosen token matches the API', async () => {
      await settle(page, () => page.click('.token-chips [data-token="3"]'));
      assert.equal(params(page).get('token'), '3');
      const dec = await api(base, '/api/decompose', { text: typed, layer: 3, token: 3 });
      const norms = Buffer.from(dec.contribution_norms.data, 'base64');
      const shownNorms = await page.$$eval('#decomposition [data-norm]', (els) =>
        els.map((e) => Number(e.getAttribute('data-norm'))),
      );
      assert.equal(shownNorms.length, 12);
      shownNorms.forEach((n, i) => assert.equal(Math.fround(n), norms.readFloatLE(4 * i)));
      assert.equal((await page.$$('#decomposition [data-head-output]')).length, 12);
      assert.match(await page.textContent('#sum-check'), /✓/);
      // The token as it reads (the server's display form: the text it covers, "Bob" in the typed text).
      const shown = (await api(base, '/api/tokenize', { text: typed })).tokens[3];
      assert.ok(
        (await page.textContent('#why-contributions')).startsWith(
          `For “${shown.display ?? shown.text}”, the heads adding most`,
        ),
      );
      await part('.projection', '05-projection.png');
      await part('.why', '06-why-several-heads.png');
    });

    await suite.test('words, hidden special tokens and the log scale', async () => {
      await page.$eval('.toolbar', (e) => e.scrollIntoView());
      await settle(page, () => page.click('.toolbar [data-level="word"]'));
      const words = await api(base, '/api/run', { text: typed, level: 'word' });
      await checkHeadPanel(page, base, typed, 'word', 3, 9);
      const U = words.n_units,
        specials = words.words.filter((w) => w.special).length;
      assert.equal(
        await page.getAttribute('#head-panel canvas.labeled-heatmap', 'aria-label'),
        `attention heatmap, ${U} × ${U}`,
      );
      await settle(page, () => page.check('#hide-special'));
      assert.equal(
        await page.getAttribute('#head-panel canvas.labeled-heatmap', 'aria-label'),
        `attention heatmap, ${U - specials} × ${U - specials}`,
      );
      await checkHeadPanel(page, base, typed, 'word', 3, 9, 'hide');
      await settle(page, () => page.selectOption('#scale-select', 'log'));
      assert.equal(await page.getAttribute('.layer-view .legend', 'data-scale'), 'log');
      assert.deepEqual(await page.$$eval('.layer-view .legend-ticks span', (els) => els.map((e) => e.textContent)), [
        '0.001',
        '0.01',
        '0.1',
        '1.0',
      ]);
      const p = params(page);
      assert.equal(p.get('level'), 'word');
      assert.equal(p.get('special'), 'hide');
      assert.equal(p.get('scale'), 'log');
      await page.$eval('#learning-context', (e) => e.scrollIntoView());
      await page.$eval('#learning-context', (d) => (d.open = false));
      await shot('07-words-no-specials-log.png');
      await page.$eval('#learning-context', (d) => (d.open = true));
    });

    await suite.test('the view state survives a reload from the URL', async () => {
      const url = page.url();
      await page.goto(url);
      await page.waitForFunction(() => document.body.hasAttribute('data-ready'), null, { timeout: 60000 });
      assert.equal(await page.inputValue('#text-input'), typed);
      assert.equal(await page.isChecked('#hide-special'), true);
      assert.equal(await page.inputValue('#scale-select'), 'log');
      await checkHeadPanel(page, base, typed, 'word', 3, 9, 'hide');
      await settle(page, () => page.click('.toolbar [data-level="token"]'));
      await settle(page, () => page.uncheck('#hide-special'));
      await settle(page, () => page.selectOption('#scale-select', 'linear'));
    });

    await suite.test(
      'every registered view: its tab, its digit key, and only its own part of #views shown',
      async () => {
        const tabs = await page.$$eval('.tabs .tab', (els) => els.map((e) => e.getAttribute('data-view')));
        assert.deepEqual(tabs.slice(0, 4), ['layer', 'model', 'lines', 'compare']);
        assert.equal(await page.$$eval('#views > *', (els) => els.length), tabs.length);
        await page.evaluate(() => document.activeElement?.blur());
        for (const [i, id] of tabs.entries()) {
          await settle(page, () => page.keyboard.press(String(i + 1)));
          assert.equal(params(page).get('view'), id === 'layer' ? null : id);
          assert.equal(await page.getAttribute('.tab.active', 'data-view'), id);
          const shown = await page.$$eval('#views > *', (els) => els.map((e) => !e.hidden));
          assert.deepEqual(
            shown,
            tabs.map((_, j) => j === i),
            `only view ${id} is shown`,
          );
          assert.ok(
            (await page.$eval(`#views > :nth-child(${i + 1}) h2`, (e) => e.textContent)).trim() !== '',
            `${id} has drawn its heading`,
          );
        }
        await settle(page, () => page.keyboard.press('1'));
      },
    );

    await suite.test('model view: every head badged by role; click selects a head', async () => {
      await settle(page, () => page.click('.tab[data-view="model"]'));
      const canvas = page.locator('#model-grid');
      const box = await canvas.boundingBox();
      assert.ok(box.width > 600 && box.height > 300, `grid ${box.width}×${box.height}`);
      const legend = await page.textContent('#role-legend');
      assert.match(legend, /heads?/);
      // Click the thumbnail of layer 1, head 2: label column 34 px, header 18 px, cells thumb+gap.
      const thumb = await page.evaluate(() => {
        const c = document.getElementById('model-grid');
        return (parseFloat(c.style.width) - 34) / 12;
      });
      await settle(page, () =>
        canvas.click({ position: { x: 34 + thumb * 2 + thumb / 2, y: 18 + (thumb + 8) * 1 + thumb / 2 } }),
      );
      assert.equal(params(page).get('layer'), '1');
      assert.equal(params(page).get('head'), '2');
      await part('.model-view', '08-model-view.png');
    });

    await suite.test('head lines: hover and click-to-lock', async () => {
      await settle(page, () => page.click('.tab[data-view="lines"]'));
      const canvas = page.locator('#lines-canvas');
      await canvas.scrollIntoViewIfNeeded();
      // Token 2 on the left (rows start 28 px down, 20 px each; labels end at x = 178).
      await canvas.hover({ position: { x: 150, y: 28 + 2 * 20 + 10 } });
      await page.waitForSelector('.tooltip', { state: 'visible' });
      assert.match(await page.textContent('.tooltip'), /attends to/);
      await settle(page, () => canvas.click({ position: { x: 150, y: 28 + 2 * 20 + 10 } }));
      assert.equal(params(page).get('lock'), '2');
      assert.match(await page.textContent('#lines-note'), /^Locked on “gave”/);
      await part('.lines-view', '09-head-lines-locked.png');
      await settle(page, () => page.keyboard.press('Escape'));
      assert.equal(params(page).get('lock'), null);
    });

    await suite.test('compare two heads and their difference', async () => {
      const selected = `${params(page).get('layer')}.${params(page).get('head')}`;
      await settle(page, () => page.click('.tab[data-view="compare"]'));
      // Compare opens on the selected head (kept where it already was A or B).
      assert.ok([params(page).get('a'), params(page).get('b')].includes(selected), `${page.url()} for ${selected}`);
      await settle(page, () => page.selectOption('#compare-a-layer', '2'));
      await settle(page, () => page.selectOption('#compare-a-head', '0'));
      await settle(page, () => page.selectOption('#compare-b-layer', '0'));
      await settle(page, () => page.selectOption('#compare-b-head', '7'));
      const p = params(page);
      assert.equal(p.get('a'), '2.0');
      assert.equal(p.get('b'), '0.7');
      assert.match(await page.textContent('#compare-summary'), /^Mean distance between their rows: \d\.\d{3}/);
      assert.equal((await page.$$('.compare-fig canvas')).length, 3);
      await part('.compare-view', '10-compare.png');
    });

    await suite.test('export the current view as PNG and SVG, the statistics as CSV and JSON', async () => {
      const save = async (button, name) => {
        const [download] = await Promise.all([page.waitForEvent('download'), page.click(button)]);
        const file = path.join(outDir, name);
        await download.saveAs(file);
        return file;
      };
      await settle(page, () => page.click('.tab[data-view="layer"]'));
      const png = await save('#export-png', 'export-layer.png');
      const size = pngSize(png);
      assert.ok(size.width >= 1000 && size.height >= 400, `PNG ${size.width}×${size.height}`);
      const svg = fs.readFileSync(await save('#export-svg', 'export-layer.svg'), 'utf8');
      assert.ok(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'));
      assert.ok(svg.includes('>H11<') && svg.includes('attention weight (linear, 0–1)'));
      assert.ok((svg.match(/<rect /g) ?? []).length > 12 * 13 * 13, 'heatmap cells are vector rects');
      await settle(page, () => page.click('.tab[data-view="compare"]'));
      pngSize(await save('#export-png', 'export-compare.png'));
      assert.ok(fs.readFileSync(await save('#export-svg', 'export-compare.svg'), 'utf8').includes('A − B'));
      const csvAll = fs
        .readFileSync(await save('#export-csv', 'export-stats.csv'), 'utf8')
        .trim()
        .split(/\r\n/);
      // Four lines say what the file holds, the model, the text and the numbering.
      assert.match(csvAll[3], /^# numbering: layers, heads and key\/value heads counted from 1/);
      const csv = csvAll.filter((l) => !l.startsWith('#'));
      assert.equal(csv.length, 73);
      const run = await api(base, '/api/run', { text: typed });
      const header = csv[0].split(',');
      const row = csv[1 + 3 * 12 + 9].split(',');
      assert.equal(Number(row[header.indexOf('entropy_bits')]), run.heads[3 * 12 + 9].stats.entropy_bits);
      assert.deepEqual([row[0], row[1]], ['4', '10'], 'layer 4, head 10 as the page counts them');
      const json = JSON.parse(fs.readFileSync(await save('#export-json', 'export-stats.json'), 'utf8'));
      assert.equal(json.heads.length, 72);
      const h5 = run.heads[5];
      // Numbered from 1 as on the page; the links on the text are the API's, written with the page's token labels.
      const { on_text: exported, ...rest } = json.heads[5];
      const { on_text: served, ...api5 } = h5;
      assert.deepEqual(rest, { ...api5, layer: h5.layer + 1, head: h5.head + 1, kv_head: h5.kv_head + 1 });
      assert.deepEqual(exported?.links, served?.links);
      await settle(page, () => page.click('.tab[data-view="layer"]'));
    });

    await suite.test('text and controls meet WCAG AA contrast', async () => {
      const pairs = await page.evaluate(() => {
        const parse = (c) => (c.match(/[\d.]+/g) ?? []).map(Number);
        const background = (el) => {
          for (let e = el; e; e = e.parentElement) {
            const c = parse(getComputedStyle(e).backgroundColor);
            if (c.length === 3 || (c.length === 4 && c[3] > 0.5)) return c.slice(0, 3);
          }
          return [255, 255, 255];
        };
        const sels = [
          'h1',
          '.lead',
          '.kicker',
          '.muted',
          '.stat-value',
          '.stat-note',
          '.tab.active',
          'button.primary',
          '.chip[aria-pressed="true"]',
          '.segmented button[aria-pressed="true"]',
          '#head-description',
          '.legend figcaption',
          '.vector-value',
          '.sum-check',
        ];
        return sels.flatMap((s) =>
          [...document.querySelectorAll(s)]
            .slice(0, 3)
            .map((el) => ({ s, fg: parse(getComputedStyle(el).color).slice(0, 3), bg: background(el) })),
        );
      });
      assert.ok(pairs.length >= 14);
      for (const { s, fg, bg } of pairs) {
        const [a, b] = [luminance(fg), luminance(bg)];
        const ratio = (Math.max(a, b) + 0.05) / (Math.min(a, b) + 0.05);
        assert.ok(ratio >= 4.5, `${s}: contrast ${ratio.toFixed(2)} (${fg} on ${bg})`);
      }
    });

    await suite.test('scale: a 500-token text with every head on screen', async () => {
      const sentence = 'The committee reviewed every proposal carefully before the final vote. ';
      const long = sentence.repeat(46).trim(); // 11 tokens each: 508 with [CLS] and [SEP]
      const tokens = (await api(base, '/api/run', { text: long })).n_tokens;
      assert.ok(tokens > 500 && tokens <= 512, `${tokens} tokens`);
      await page.fill('#text-input', long);
      let t0 = Date.now();
      await settle(page, () => page.press('#text-input', 'Enter'));
      timings.first_view_ms = Date.now() - t0;
      assert.equal(
        await page.getAttribute('#head-panel canvas.labeled-heatmap', 'aria-label'),
        `attention heatmap, ${tokens} × ${tokens}`,
      );
      t0 = Date.now();
      await settle(page, () => page.click('#head-grid [data-head="4"]'));
      timings.head_switch_ms = Date.now() - t0;
      t0 = Date.now();
      await settle(page, () => page.click('.toolbar [data-layer="2"]'));
      timings.layer_switch_ms = Date.now() - t0;
      await page.$eval('#learning-context', (e) => e.scrollIntoView());
      await page.$eval('#learning-context', (d) => (d.open = false));
      await shot('11-scale-500-tokens.png');
      await part('#head-panel', '11b-scale-head-panel.png');
      t0 = Date.now();
      await settle(page, () => page.click('.tab[data-view="model"]'));
      timings.model_view_ms = Date.now() - t0;
      t0 = Date.now();
      await settle(page, () => page.selectOption('#scale-select', 'contrast'));
      timings.model_view_rescale_ms = Date.now() - t0;
      await part('.model-view', '12-scale-model-view.png');
      console.log(`    timings at ${tokens} tokens: ${JSON.stringify(timings)}`);
      fs.writeFileSync(path.join(outDir, 'timings.json'), JSON.stringify({ tokens, ...timings }, null, 2));
    });

    await suite.test('no errors in the page console', async () => {
      assert.deepEqual(pageErrors, []);
    });
  } finally {
    await browser.close();
  }
}
