// The Head map view in Chromium against one live server, at 1400 × 900 and on a 390 × 844 touch
// phone: one point per head (n_layer · n_head), each at the place POST /api/head_map gives it (one
// scale for both axes, y upwards), coloured by the head's primary role on the text of POST
// /api/run; hovering (tapping) a point shows that head's card, clicking it (a second tap) selects
// it; the legend lists the roles present; no horizontal overflow; the JSON download holds the
// API's heads (counted from 1) and the CSV its rows; the corpus evidence line says what the roles
// were measured on, or that there is none and how to get it. On decoders no head is "Sink" and,
// where the rule holds, some are "Dormant". Screenshots: test-results/50-<tag>-*.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

export const HEADMAP_TEXT = "The trophy didn't fit into the suitcase because it was too big.";

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** Every drawn point: its head, the map place it says it shows, and where it is drawn. */
function points(page) {
  return page.$$eval('#headmap-svg circle.headmap-point', (els) =>
    els.map((e) => ({
      index: Number(e.dataset.index),
      layer: Number(e.dataset.layer),
      head: Number(e.dataset.head),
      x: Number(e.dataset.x),
      y: Number(e.dataset.y),
      cx: Number(e.getAttribute('cx')),
      cy: Number(e.getAttribute('cy')),
      r: Number(e.getAttribute('r')),
      role: e.dataset.role,
      fill: e.getAttribute('fill'),
    })),
  );
}

/** The screen point of head `index`'s circle (the picture may be shown smaller than drawn). */
async function screenPoint(page, index) {
  await page.$eval(`#headmap-svg circle[data-index="${index}"]`, (c) => c.scrollIntoView({ block: 'center' }));
  return page.$eval(`#headmap-svg circle[data-index="${index}"]`, (c) => {
    const r = c.getBoundingClientRect();
    return { x: r.left + r.width / 2, y: r.top + r.height / 2 };
  });
}

/** The head whose nearest neighbour on the map is farthest away (a hover lands on it alone). */
function loneHead(api) {
  let best = 0,
    bestD = -1;
  api.heads.forEach((p, i) => {
    let d = Infinity;
    api.heads.forEach((q, j) => {
      if (i !== j) d = Math.min(d, Math.hypot(p.x - q.x, p.y - q.y));
    });
    if (d > bestD) [best, bestD] = [i, d];
  });
  return best;
}

/** Least-squares line through (a, b): slope and intercept. */
function fit(a, b) {
  const n = a.length;
  const ma = a.reduce((s, v) => s + v, 0) / n,
    mb = b.reduce((s, v) => s + v, 0) / n;
  let sab = 0,
    saa = 0;
  for (let i = 0; i < n; i++) {
    sab += (a[i] - ma) * (b[i] - mb);
    saa += (a[i] - ma) ** 2;
  }
  const slope = sab / saa;
  return { slope, intercept: mb - slope * ma };
}

export async function headMapTests(base, suite, outDir, { tag }) {
  const model = await (await fetch(base + '/api/model')).json();
  const L = model.n_layer,
    H = model.n_head;
  const api = await post(base, '/api/head_map', {});
  assert.equal(api.status, 200, JSON.stringify(api.body).slice(0, 300));
  const run = await post(base, '/api/run', { text: HEADMAP_TEXT, truncate: true, level: 'token', special: 'keep' });
  assert.equal(run.status, 200);
  const colours = new Map(model.roles.map((r) => [r.id, r.color]));
  const shot = async (page, selector, name, keepPointer = false) => {
    if (!keepPointer) await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: path.join(outDir, `50-${tag}-${name}.png`) });
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
      const phone = viewport.width < 500;
      const size = `${viewport.width}×${viewport.height}`;
      const context = await browser.newContext({
        viewport,
        deviceScaleFactor: 1,
        ...(phone ? { isMobile: true, hasTouch: true } : {}),
      });
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${base}/?view=head-map&text=${encodeURIComponent(HEADMAP_TEXT)}`);
      await page.waitForFunction(
        () => ['ready', 'error'].includes(document.querySelector('.headmap-view')?.dataset.state),
        null,
        { timeout: 180000 },
      );
      await page.waitForFunction(() => /^\d+$/.test(document.body.dataset.ready ?? ''), null, { timeout: 180000 });
      const ctx = { page, api: api.body, run: run.body, model, L, H, colours, tag, size, phone, outDir, base, shot };
      await drawnTests(suite, ctx);
      await pointerTests(suite, ctx);
      await downloadTests(suite, ctx);
      if (model.causal && !phone) await decoderRoleTests(suite, ctx);
      assert.deepEqual(errors, []);
      await context.close();
    }
  } finally {
    await browser.close();
  }
}

/** The points, their places, colours, the legend, the words around the map, no overflow. */
async function drawnTests(suite, { page, api, run, model, L, H, colours, tag, size, phone, shot }) {
  await suite.test(`${tag} ${size}: ${L * H} points, each where the API places it`, async () => {
    assert.equal(await page.$eval('.headmap-view', (e) => e.dataset.state), 'ready');
    const pts = (await points(page)).sort((a, b) => a.index - b.index);
    assert.equal(pts.length, L * H);
    assert.equal(api.heads.length, L * H);
    pts.forEach((p, i) => {
      const a = api.heads[i];
      assert.deepEqual([p.index, p.layer, p.head], [i, a.layer, a.head]);
      assert.equal(a.layer * H + a.head, i);
      assert.equal(p.x, a.x);
      assert.equal(p.y, a.y);
    });
    // One scale for both axes: cx = a + k·x, cy = b − k·y (y upwards on the map).
    const fx = fit(
      pts.map((p) => p.x),
      pts.map((p) => p.cx),
    );
    const fy = fit(
      pts.map((p) => p.y),
      pts.map((p) => p.cy),
    );
    assert.ok(fx.slope > 0, `x scale ${fx.slope}`);
    assert.ok(Math.abs(fy.slope + fx.slope) < 1e-3 * fx.slope, `x scale ${fx.slope}, y scale ${fy.slope}`);
    for (const p of pts) {
      assert.ok(Math.abs(fx.intercept + fx.slope * p.x - p.cx) < 0.02, `head ${p.index}: cx ${p.cx}`);
      assert.ok(Math.abs(fy.intercept + fy.slope * p.y - p.cy) < 0.02, `head ${p.index}: cy ${p.cy}`);
    }
    const k = Number(await page.$eval('#headmap-svg', (e) => e.dataset.k));
    assert.ok(Math.abs(k - fx.slope) < 1e-3 * k, `data-k ${k}, fitted ${fx.slope}`);
    // Every point inside the picture.
    const box = await page.$eval('#headmap-svg', (e) => ({
      w: Number(e.getAttribute('width')),
      h: Number(e.getAttribute('height')),
    }));
    for (const p of pts) assert.ok(p.cx > 0 && p.cx < box.w && p.cy > 0 && p.cy < box.h, `head ${p.index} outside`);
  });

  await suite.test(
    `${tag} ${size}: colours are the roles on the text, the legend lists the roles present`,
    async () => {
      const pts = await points(page);
      for (const p of pts) {
        const role = run.heads[p.index].roles.primary.id;
        assert.equal(p.role, role, `head ${p.index}`);
        assert.equal(p.fill, colours.get(role));
      }
      const present = [...new Set(run.heads.map((r) => r.roles.primary.id))].sort();
      const legend = await page.$$eval('#headmap-legend li', (els) => els.map((e) => e.dataset.role));
      assert.deepEqual([...legend].sort(), present);
      const counts = await page.$$eval('#headmap-legend li', (els) => els.map((e) => e.textContent));
      for (const id of present) {
        const n = run.heads.filter((r) => r.roles.primary.id === id).length;
        const name = model.roles.find((r) => r.id === id).name;
        assert.ok(
          counts.some((c) => c.includes(`${name}: ${n} head`)),
          `${name}: ${n} in ${counts}`,
        );
      }
      if (model.causal) {
        assert.ok(!present.includes('sink'), `a decoder head labelled Sink: ${present}`);
        const legendText = await page.textContent('#headmap-legend');
        assert.ok(!/Sink/.test(legendText), legendText);
      }
    },
  );

  await suite.test(
    `${tag} ${size}: the corpus, the axes' share and closeness in words; no sideways scroll`,
    async () => {
      const summary = await page.textContent('#headmap-summary');
      assert.ok(summary.includes(api.source), summary);
      const pct = Math.round(api.explained * 100);
      assert.ok(summary.includes(`the two axes hold ${pct} % of the differences between heads`), summary);
      assert.match(await page.textContent('#headmap-closeness'), /square root of the mean Jensen–Shannon divergence/);
      const ev = model.corpus_evidence;
      const measured = !/^(not measured yet|none)/.test(ev.source);
      const note = await page.$eval('#headmap-evidence', (e) => ({ state: e.dataset.evidence, text: e.textContent }));
      if (measured) {
        assert.equal(note.state, 'present');
        assert.ok(note.text.includes(ev.source), note.text);
      } else {
        assert.equal(note.state, 'missing');
        assert.match(note.text, /No corpus evidence/);
      }
      const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
      assert.ok(overflow <= 1, `the page is ${overflow} px wider than the screen`);
      const plot = await page.$eval('#headmap-svg', (e) => e.getBoundingClientRect().right);
      assert.ok(plot <= (phone ? 390 : 1400), `the map ends at ${plot}`);
      await shot(page, '.headmap-view', `${phone ? 'phone' : 'wide'}-map`);
    },
  );
}

/** Hover (tap) shows the head's card; click (second tap) selects it in the whole page. */
async function pointerTests(suite, { page, api, run, model, H, tag, size, phone, shot }) {
  await suite.test(`${tag} ${size}: ${phone ? 'a tap' : 'hovering'} shows the head's card`, async () => {
    const i = loneHead(api);
    const p = api.heads[i];
    const at = await screenPoint(page, i);
    if (phone) await page.touchscreen.tap(at.x, at.y);
    else await page.mouse.move(at.x, at.y);
    await page.waitForFunction(
      (n) =>
        document.querySelector('#headmap-card')?.dataset.layer +
          '.' +
          document.querySelector('#headmap-card')?.dataset.head ===
        n,
      `${p.layer}.${p.head}`,
    );
    const title = await page.textContent('#headmap-card-title');
    assert.equal(title, `Layer ${p.layer + 1} · Head ${p.head + 1}`);
    const role = await page.textContent('#headmap-card-role');
    const primary = run.heads[i].roles.primary;
    assert.ok(role.startsWith(primary.label), role);
    assert.ok(role.toLowerCase().includes(primary.evidence.slice(1, 30).toLowerCase()), role);
    const card = await page.textContent('#headmap-card');
    assert.ok(card.includes(`index ${p.layer}.${p.head}`), card);
    if (model.n_kv_head < H) assert.ok(card.includes(`KV head ${p.kv_head + 1}:`), card);
    else assert.ok(card.includes(`KV ${p.kv_head + 1}`), card);
    await shot(page, '.headmap-view', `${phone ? 'phone' : 'wide'}-card`, true);
  });

  await suite.test(`${tag} ${size}: ${phone ? 'a second tap' : 'a click'} selects the head`, async () => {
    const i = loneHead(api);
    const p = api.heads[i];
    const at = await screenPoint(page, i);
    if (phone) await page.touchscreen.tap(at.x, at.y);
    else await page.mouse.click(at.x, at.y);
    await page.waitForFunction((want) => {
      const q = new URLSearchParams(location.search);
      return `${q.get('layer')}.${q.get('head')}` === want;
    }, `${p.layer}.${p.head}`);
    await page.waitForFunction(
      (n) => document.querySelector('#headmap-svg circle[data-selected]')?.dataset.index === n,
      String(i),
    );
    assert.match(await page.textContent('#head-title'), new RegExp(`^Head ${p.head + 1} \\(index ${p.head}\\)`));
    const evidence = await page.$eval('#head-evidence', (e) => e.dataset.evidence);
    assert.ok(['present', 'missing'].includes(evidence));
  });
}

/** Decoders: no head is "Sink"; where the run labels heads "Dormant", the legend, the head panel
 *  and "Why several heads?" show them by that name, with what they do with the rest. */
async function decoderRoleTests(suite, { page, run, model, H, tag, size, base, outDir }) {
  await suite.test(`${tag} ${size}: decoder roles: no Sink, dormant heads named as such`, async () => {
    const ids = run.heads.map((r) => r.roles.primary.id);
    assert.ok(!ids.includes('sink'), 'a decoder head labelled Sink');
    const dormant = run.heads.filter((r) => r.roles.primary.id === 'dormant');
    if (tag === 'smollm2') assert.ok(dormant.length > 0, 'SmolLM2 has dormant heads on the trophy sentence');
    if (dormant.length === 0) return;
    const d = dormant[0];
    assert.ok((await page.textContent('#headmap-legend')).includes('Dormant'));
    await page.goto(`${base}/?view=head-map&layer=${d.layer}&head=${d.head}&text=${encodeURIComponent(HEADMAP_TEXT)}`);
    await page.waitForFunction(() => document.querySelector('.headmap-view')?.dataset.state === 'ready', null, {
      timeout: 180000,
    });
    await page.waitForFunction(() => /^\d+$/.test(document.body.dataset.ready ?? ''), null, { timeout: 180000 });
    assert.match(await page.textContent('#head-title'), / – Dormant$/);
    assert.match(await page.textContent('#headmap-card-role'), /^Dormant /);
    const why = await page.textContent('#why-roles');
    assert.ok(why.includes('Dormant') && !why.includes('Sink'), why);
    const inLayer = dormant.filter((r) => r.layer === d.layer).length;
    const note = await page.textContent('#why-dormant');
    assert.ok(note.includes(inLayer === 1 ? 'One head' : `${inLayer} heads`), note);
    assert.match(note, /next strongest pattern: head \d+ [a-z]/);
    assert.equal(
      await page.$eval(`#headmap-svg circle[data-index="${d.layer * H + d.head}"]`, (e) => e.dataset.selected),
      'true',
    );
    assert.ok(model.roles.some((r) => r.id === 'dormant'));
    await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator('.why').screenshot({ path: path.join(outDir, `50-${tag}-why-dormant.png`) });
  });
}

/** The JSON and CSV downloads (the wide screen). */
async function downloadTests(suite, { page, api, model, L, H, tag, size, phone, outDir }) {
  if (phone) return;
  await suite.test(`${tag} ${size}: the JSON download holds the API's heads, the CSV one row per head`, async () => {
    const save = async (button) => {
      await page.mouse.move(0, 0);
      const [download] = await Promise.all([page.waitForEvent('download'), page.click(button)]);
      const file = path.join(outDir, `50-${tag}-${download.suggestedFilename()}`);
      await download.saveAs(file);
      return { name: download.suggestedFilename(), text: fs.readFileSync(file, 'utf8') };
    };
    const json = await save('#headmap-json');
    assert.equal(json.name, `headscope-${model.name}-head-map.json`);
    const j = JSON.parse(json.text);
    assert.equal(j.model, model.name);
    assert.match(j.numbering, /counted from 1/);
    assert.deepEqual(
      j.heads,
      api.heads.map((p) => ({ ...p, layer: p.layer + 1, head: p.head + 1, kv_head: p.kv_head + 1 })),
    );
    assert.deepEqual(j.distance, api.distance);
    assert.equal(j.explained, api.explained);
    assert.equal(j.source, api.source);
    const csv = await save('#headmap-csv');
    assert.equal(csv.name, `headscope-${model.name}-head-map.csv`);
    const lines = csv.text.trim().split('\r\n');
    assert.equal(lines[1], `# model: ${model.name}`);
    assert.match(lines[2], /^# text: none; the map does not depend on the explorer's text/);
    assert.match(lines[3], /^# numbering: layers, heads and key\/value heads counted from 1/);
    const rows = lines.filter((l) => !l.startsWith('#'));
    assert.equal(rows[0], 'layer,head,kv_head,x,y');
    assert.equal(rows.length - 1, L * H);
    const last = api.heads[L * H - 1];
    assert.equal(rows[L * H], `${L},${H},${last.kv_head + 1},${last.x},${last.y}`);
    // The toolbar's SVG export draws the map: its title and one round mark per head.
    const svg = await save('#export-svg');
    assert.equal(svg.name, `headscope-${model.name}-head-map.svg`);
    assert.ok(svg.text.includes(`Head map of ${model.name}`), svg.text.slice(0, 300));
    assert.ok((svg.text.match(/<rect [^>]*rx=/g) ?? []).length >= L * H, 'a mark per head');
  });
}

/** A server whose cache holds no corpus evidence: the page says so and how to measure it. */
export async function missingEvidenceTests(base, suite, outDir) {
  const model = await (await fetch(base + '/api/model')).json();
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    const page = await (await browser.newContext({ viewport: { width: 1400, height: 900 } })).newPage();
    await suite.test(
      'no corpus evidence: the model overview, the head panel and the head map say so and how to get it',
      async () => {
        assert.match(model.corpus_evidence.source, /^(not measured yet|none)/);
        await page.goto(`${base}/?view=model&text=${encodeURIComponent(HEADMAP_TEXT)}`);
        await page.waitForFunction(() => /^\d+$/.test(document.body.dataset.ready ?? ''), null, { timeout: 180000 });
        for (const id of ['#model-evidence', '#head-evidence']) {
          const note = await page.$eval(id, (e) => ({ state: e.dataset.evidence, text: e.textContent }));
          assert.equal(note.state, 'missing', id);
          assert.match(note.text, /^No corpus evidence for this model yet: syntactic and coreference roles are off\./);
          assert.ok(note.text.includes('make evidence') && note.text.includes('--measure-corpus'), note.text);
          assert.ok(note.text.includes('2–3 minutes'), note.text);
        }
        await page.locator('#model-evidence').screenshot({ path: path.join(outDir, '50-no-evidence-model.png') });
        await page.click('.tab[data-view="head-map"]');
        await page.waitForFunction(() => document.querySelector('.headmap-view')?.dataset.state === 'ready', null, {
          timeout: 180000,
        });
        assert.equal(await page.$eval('#headmap-evidence', (e) => e.dataset.evidence), 'missing');
      },
    );
  } finally {
    await browser.close();
  }
}
