// "Compare models" on a server with two models (serve --model A --model B): both grids hold every
// head, their rows line up by relative depth, the census and the A → B answer equal what the API
// answers for each model (header Headscope-Model: 0 and 1), the PNG, SVG and CSV exports hold
// both models, at 1400 × 900 and on a 390 × 844 phone (no sideways scrolling); and a server with
// one model explains how to start one with two. Screenshots and exports go to test-results/
// (prefix twomodels-<tag>-).
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS, pngSize } from './browser.mjs';

const TROPHY = 'The trophy did not fit in the suitcase because it was too big.';
const VIEW = '#twomodels-view';

async function api(base, pathName, index, body) {
  const res = await fetch(base + pathName, {
    method: body ? 'POST' : 'GET',
    headers: { 'Content-Type': 'application/json', 'Headscope-Model': String(index) },
    body: body ? JSON.stringify(body) : undefined,
  });
  assert.equal(res.status, 200, `${pathName} on model ${index}: ${res.status}`);
  return res.json();
}

function counts(run) {
  const c = {};
  for (const head of run.heads) c[head.roles.primary.id] = (c[head.roles.primary.id] ?? 0) + 1;
  return c;
}

/** Per side: the grid's box and, per layer, the vertical centre of its cells. */
async function gridGeometry(page) {
  return page.$$eval(`${VIEW} .tm-side`, (sides) =>
    sides.map((side) => {
      const grid = side.querySelector('.tm-grid').getBoundingClientRect();
      const rows = {};
      for (const c of side.querySelectorAll('.tm-cell')) {
        const r = c.getBoundingClientRect();
        rows[c.dataset.layer] = [r.top, r.bottom];
      }
      const layers = Object.keys(rows).length;
      const box = side.getBoundingClientRect();
      return { top: grid.top, height: grid.height, layers, rows, sideTop: box.top, sideBottom: box.bottom };
    }),
  );
}

/** Where the middle of a model's stack is, relative to its grid (0 top, 1 bottom): the boundary
 *  between its two middle layers (even L) or the centre of its middle layer (odd L). */
function middle(g) {
  const L = g.layers;
  const y =
    L % 2 === 0 ? (g.rows[L / 2 - 1][1] + g.rows[L / 2][0]) / 2 : (g.rows[(L - 1) / 2][0] + g.rows[(L - 1) / 2][1]) / 2;
  return { y, relative: (y - g.top) / g.height };
}

/** A picture of the view alone, taken from the whole page so that the sticky bars stay at its top. */
async function shootView(page, file) {
  await page.evaluate(() => window.scrollTo(0, 0));
  const box = await page.locator(VIEW).boundingBox();
  await page.screenshot({ path: file, fullPage: true, clip: box });
}

async function open(page, base, text = TROPHY) {
  await page.goto(`${base}/?view=models&text=${encodeURIComponent(text)}`);
  await page.waitForSelector(`${VIEW}[data-state="ready"]`, { timeout: 240000 });
}

/** Each grid holds n_layer × n_head cells, one per head, coloured by the run's primary role. */
async function checkGrids(page, models, runs) {
  for (const side of [0, 1]) {
    const m = models[side];
    const cells = await page.$$eval(`${VIEW} .tm-side[data-side="${side}"] .tm-cell`, (els) =>
      els.map((e) => [Number(e.dataset.layer), Number(e.dataset.head), e.dataset.role]),
    );
    assert.equal(cells.length, m.n_layer * m.n_head, `${m.name}: one cell per head`);
    assert.equal(new Set(cells.map(([l, hd]) => `${l}.${hd}`)).size, cells.length);
    for (const [l, hd, role] of cells) assert.equal(role, runs[side].heads[l * m.n_head + hd].roles.primary.id);
    const name = await page.textContent(`${VIEW} .tm-side[data-side="${side}"] .tm-name`);
    assert.equal(name.trim(), m.name);
  }
}

/** The census table against counts from direct /api/run replies of each model. */
async function checkCensus(page, runs) {
  const table = await page.$$eval(`#tm-census-table tbody tr`, (rows) =>
    rows.map((r) => [r.dataset.role, [...r.querySelectorAll('td')].map((td) => Number(td.dataset.count))]),
  );
  const expected = runs.map(counts);
  const roles = new Set([...Object.keys(expected[0]), ...Object.keys(expected[1])]);
  assert.equal(table.length, roles.size, 'one row per role some head of either model has');
  for (const [role, [a, b]] of table) {
    assert.equal(a, expected[0][role] ?? 0, `${role} on the first model`);
    assert.equal(b, expected[1][role] ?? 0, `${role} on the second model`);
  }
}

/** Picks query "it" and key "trophy" as the first model splits the text; each side must name the
 *  token of its own tokenizer over the same characters and list what /api/link answers for it. */
async function checkLink(page, base, runs) {
  const find = (run, word) => run.tokens.findIndex((t) => !t.special && t.display.replace(/^##/, '') === word);
  await page.selectOption('#tm-link-query', String(find(runs[0], 'it')));
  await page.selectOption('#tm-link-key', String(find(runs[0], 'trophy')));
  await page.click('#tm-link-go');
  await page.waitForSelector('#tm-link[data-state="ready"]', { timeout: 120000 });
  for (const side of [0, 1]) {
    const sel = `.tm-link-side[data-side="${side}"]`;
    const q = Number(await page.getAttribute(sel, 'data-q')),
      k = Number(await page.getAttribute(sel, 'data-k'));
    assert.equal(q, find(runs[side], 'it'), `side ${side}: the query is "it"`);
    assert.equal(k, find(runs[side], 'trophy'), `side ${side}: the key is "trophy"`);
    const direct = await api(base, '/api/link', side, { text: TROPHY, truncate: true, q, k, limit: 8 });
    const shown = await page.$$eval(`${sel} li`, (els) =>
      els.map((e) => [Number(e.dataset.layer), Number(e.dataset.head), Number(e.dataset.weight), e.textContent]),
    );
    assert.equal(shown.length, direct.heads.length);
    direct.heads.forEach((x, i) => {
      assert.deepEqual(shown[i].slice(0, 2), [x.layer, x.head]);
      assert.ok(Math.abs(shown[i][2] - x.weight) < 1e-6, `weight of L${x.layer + 1} H${x.head + 1}`);
      assert.ok(shown[i][3].includes(x.roles.primary.label), 'its role is named');
    });
  }
}

/** Saves the download `click` starts as test-results/twomodels-<tag>-<suffix>; its name and path. */
async function saveDownload(page, click, file) {
  const [download] = await Promise.all([page.waitForEvent('download'), click()]);
  await download.saveAs(file);
  return { name: download.suggestedFilename(), file };
}

/** The toolbar's PNG and SVG and the view's CSV: named after both models, the picture with both
 *  grids (a cell per head), the census and the A → B answers, the CSV one row per head counted
 *  from 1 under the models and the text. */
async function checkExports(page, models, runs, exportPath) {
  const stem = `headscope-${models[0].name}-vs-${models[1].name}-models`;
  const png = await saveDownload(page, () => page.click('#export-png'), exportPath('export.png'));
  assert.equal(png.name, `${stem}.png`);
  const size = pngSize(png.file);
  assert.ok(size.width >= 1200 && size.height >= 1000, `PNG ${size.width}×${size.height}`);
  const svg = await saveDownload(page, () => page.click('#export-svg'), exportPath('export.svg'));
  assert.equal(svg.name, `${stem}.svg`);
  const doc = fs.readFileSync(svg.file, 'utf8');
  assert.ok(doc.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'));
  for (const s of ['headscope · Compare models view', models[0].name, models[1].name, 'Roles in each model'])
    assert.ok(doc.includes(s), `the SVG names ${s}`);
  assert.ok(doc.includes('Which heads link A → B?') && doc.includes('from ‘it’ to ‘trophy’'), 'the A → B answers');
  const heads = models.reduce((n, m) => n + m.n_layer * m.n_head, 0);
  assert.ok((doc.match(/<rect /g) ?? []).length > heads, 'a cell per head');
  const csv = await saveDownload(page, () => page.click('#tm-export-csv'), exportPath('roles.csv'));
  assert.equal(csv.name, `${stem}-roles.csv`);
  const lines = fs.readFileSync(csv.file, 'utf8').trim().split(/\r\n/);
  assert.equal(lines[0], '# headscope roles of every head of two models');
  assert.equal(lines[1], `# model: ${models[0].name} and ${models[1].name}`);
  assert.equal(lines[2], `# text: ${JSON.stringify(TROPHY)}`);
  assert.match(lines[3], /^# numbering: layers, heads and key\/value heads counted from 1/);
  assert.equal(lines[4].split(',').slice(0, 5).join(','), 'model,layer,head,kv_head,primary_role');
  const rows = lines.slice(5).map((l) => l.split(','));
  assert.equal(rows.length, heads);
  assert.deepEqual(rows[0].slice(0, 3), [models[0].name, '1', '1'], 'the first row is Layer 1, Head 1');
  for (const [model, layer, head, , role] of rows) {
    const side = model === models[0].name ? 0 : 1;
    const m = models[side];
    assert.equal(
      role,
      runs[side].heads[(layer - 1) * m.n_head + (head - 1)].roles.primary.id,
      `${model} ${layer}.${head}`,
    );
  }
}

/** The desktop checks on a two-model server. */
async function desktopTests(browser, base, suite, { shotPath, exportPath }, models, runs, quick) {
  const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  const tag = `${models[0].name} + ${models[1].name}`;
  await suite.test(`${tag} 1400×900: the tab, and n_layer × n_head role-coloured cells per model`, async () => {
    await open(page, base);
    assert.equal(await page.getAttribute('.tab[data-view="models"]', 'aria-selected'), 'true');
    await checkGrids(page, models, runs);
  });
  await suite.test(`${tag} 1400×900: the grids side by side, their layers aligned by relative depth`, async () => {
    const g = await gridGeometry(page);
    assert.ok(Math.abs(g[0].top - g[1].top) < 2 && Math.abs(g[0].height - g[1].height) < 2, 'one top, one height');
    assert.ok(Math.abs(g[0].sideTop - g[1].sideTop) < 2, 'side by side');
    const [a, b] = g.map(middle);
    assert.ok(Math.abs(a.y - b.y) < 3, `the middle of both stacks at one height (${a.y} vs ${b.y})`);
    for (const [i, m] of models.entries())
      for (const l of [0, Math.floor(m.n_layer / 2), m.n_layer - 1]) {
        const [top, bottom] = g[i].rows[l];
        const expected = g[i].top + ((l + 0.5) / m.n_layer) * g[i].height;
        assert.ok(Math.abs((top + bottom) / 2 - expected) < 2, `${m.name} layer ${l} at depth (l + ½) / L`);
      }
  });
  await suite.test(`${tag}: the census equals the counts of /api/run on each model`, () => checkCensus(page, runs));
  await suite.test(`${tag}: "which heads link A → B?" equals /api/link on each model`, () =>
    checkLink(page, base, runs),
  );
  await suite.test(`${tag}: PNG and SVG of the view and the CSV of every head name both models`, () =>
    checkExports(page, models, runs, exportPath),
  );
  if (!quick)
    await suite.test(`${tag}: a head's card; the first model's head opens in the layer view`, async () => {
      const cell = `${VIEW} .tm-side[data-side="1"] .tm-cell[data-layer="2"][data-head="1"]`;
      await page.hover(cell);
      const card = await page.textContent(`${VIEW} .tm-side[data-side="1"] .tm-card`);
      const report = runs[1].heads[2 * models[1].n_head + 1];
      assert.ok(card.includes(report.roles.primary.label) && card.includes(report.roles.primary.evidence));
      await page.click(`${VIEW} .tm-side[data-side="0"] .tm-cell[data-layer="1"][data-head="3"]`);
      await shootView(page, shotPath('desktop'));
      await page.click(`${VIEW} .tm-side[data-side="0"] .tm-open`);
      await page.waitForFunction(() => new URL(location.href).searchParams.get('view') === null);
      const p = new URL(page.url()).searchParams;
      assert.deepEqual([p.get('layer'), p.get('head')], ['1', '3']);
    });
  else await shootView(page, shotPath('desktop'));
  await suite.test(`${tag} 1400×900: no page errors`, () => assert.deepEqual(errors, []));
  await page.context().close();
}

async function phoneTests(browser, base, suite, shotPath, models) {
  const ctx = await browser.newContext({
    viewport: { width: 390, height: 844 },
    isMobile: true,
    hasTouch: true,
    deviceScaleFactor: 2,
  });
  const page = await ctx.newPage();
  await suite.test(
    `${models[0].name} + ${models[1].name} 390×844: the two models stacked, aligned within their grids, nothing wider than the screen`,
    async () => {
      await open(page, base);
      const g = await gridGeometry(page);
      assert.ok(g[1].sideTop >= g[0].sideBottom - 1, 'the second model under the first');
      assert.ok(Math.abs(g[0].height - g[1].height) < 2, 'grids of one height');
      const [a, b] = g.map(middle);
      assert.ok(Math.abs(a.relative - b.relative) < 0.02, 'the middle of both stacks at one relative height');
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no horizontal overflow');
      for (const [i, m] of models.entries())
        assert.equal(await page.locator(`${VIEW} .tm-side[data-side="${i}"] .tm-cell`).count(), m.n_layer * m.n_head);
      await page.tap(`${VIEW} .tm-side[data-side="1"] .tm-cell[data-layer="0"][data-head="0"]`);
      assert.equal(await page.getAttribute(`${VIEW} .tm-side[data-side="1"] .tm-card`, 'data-layer'), '0');
      await page.click('#tm-link-go');
      await page.waitForSelector('#tm-link[data-state="ready"]', { timeout: 120000 });
      assert.ok((await page.evaluate(() => document.documentElement.scrollWidth)) <= 390, 'no overflow with answers');
      await shootView(page, shotPath('phone'));
    },
  );
  await ctx.close();
}

/**
 * A server with two models: tag names the screenshots; quick leaves out the card check.
 */
export async function twoModelsTests(base, suite, outDir, { tag, quick = false }) {
  const listed = await (await fetch(base + '/api/models')).json();
  const models = listed.models.map((m) => m.model);
  await suite.test(`GET /api/models lists two models; the header picks one`, async () => {
    assert.deepEqual(
      listed.models.map((m) => m.index),
      [0, 1],
    );
    for (const i of [0, 1]) assert.equal((await api(base, '/api/model', i)).name, models[i].name);
  });
  const runs = await Promise.all([0, 1].map((i) => api(base, '/api/run', i, { text: TROPHY, truncate: true })));
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  const shotPath = (name) => path.join(outDir, `twomodels-${tag}-${name}.png`);
  const exportPath = (name) => path.join(outDir, `twomodels-${tag}-${name}`);
  try {
    await desktopTests(browser, base, suite, { shotPath, exportPath }, models, runs, quick);
    await phoneTests(browser, base, suite, shotPath, models);
  } finally {
    await browser.close();
  }
}

/** A server with one model: the view explains how to start one with two, and draws no grid. */
export async function singleModelTests(base, suite, outDir) {
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    await suite.test('one model: the view explains how to serve two, and draws no grid', async () => {
      await page.goto(`${base}/?view=models&text=${encodeURIComponent(TROPHY)}`);
      await page.waitForSelector(`${VIEW}[data-state="single"]`, { timeout: 120000 });
      assert.ok(await page.isVisible('#tm-single'));
      assert.match(await page.textContent('#tm-single'), /--model .+ --model /);
      assert.equal(await page.locator(`${VIEW} .tm-cell`).count(), 0);
      assert.equal(await page.locator('#tm-census-table').count(), 0);
      await shootView(page, path.join(outDir, 'twomodels-single.png'));
    });
  } finally {
    await browser.close();
  }
}
