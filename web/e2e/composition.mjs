// The Composition view in Chromium against one live server, at 1400 × 900 and on a 390 × 844
// phone: a grid of n_layer · n_head heads per side drawn from POST /api/composition, the list of
// the highest pairs equal to the API's, tooltips that name a pair with its score and baseline (and
// say "no path" below the diagonal), the kind selector, the notes on RoPE and grouped-query
// attention, and (wide screen) a selected pair traced in the Patching view by path patching, whose
// number is the API's. Screenshots: test-results/40-<tag>-*.png.
import assert from 'node:assert/strict';
import fs from 'node:fs';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

const TOP = 20;

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  return { status: res.status, body: await res.json() };
}

/** A point of the page inside cell (row i, column j) of the grid, on whole pixels (a mouse event's
 *  clientX and clientY are whole numbers; SmolLM2's cells are one pixel on a phone). */
async function cellPoint(page, i, j) {
  // The row in the middle of the screen first (the grid may be taller than the window).
  await page.$eval(
    '#composition-grid',
    (c, row) => {
      const r = c.getBoundingClientRect();
      const y =
        r.top + ((Number(c.dataset.margin) + row * Number(c.dataset.cell)) * r.height) / Number(c.dataset.width);
      window.scrollBy(0, y - window.innerHeight / 2);
    },
    i,
  );
  const d = await page.$eval('#composition-grid', (c) => {
    const r = c.getBoundingClientRect();
    return {
      cell: Number(c.dataset.cell),
      margin: Number(c.dataset.margin),
      width: Number(c.dataset.width),
      left: r.left,
      top: r.top,
      shown: r.width,
    };
  });
  const scale = d.shown / d.width;
  const start = (k) => (d.margin + k * d.cell) * scale;
  return { x: Math.ceil(d.left + start(j) + 1e-6), y: Math.ceil(d.top + start(i) + 1e-6) };
}

/** Moves the mouse over cell (i, j). */
async function hoverCell(page, i, j) {
  await page.mouse.move(0, 0);
  const p = await cellPoint(page, i, j);
  await page.mouse.move(p.x, p.y);
}

/** The page's prompt pair as /api/patch takes it. */
async function pairShown(page, model) {
  const r = {
    clean: await page.inputValue('#patch-clean'),
    corrupt: await page.inputValue('#patch-corrupt'),
    direction: await page.inputValue('#patch-direction'),
    metric: await page.inputValue('#patch-metric'),
  };
  if (model.causal)
    Object.assign(r, { answer: await page.inputValue('#patch-answer'), wrong: await page.inputValue('#patch-wrong') });
  return r;
}

export async function compositionTests(base, suite, outDir, { tag }) {
  const model = await (await fetch(base + '/api/model')).json();
  const L = model.n_layer,
    H = model.n_head,
    n = L * H;
  const api = await post(base, '/api/composition', { gains: true, top: TOP });
  assert.equal(api.status, 200, JSON.stringify(api.body).slice(0, 300));
  const shot = async (page, selector, name) => {
    await page.mouse.move(0, 0);
    const unstick = await page.addStyleTag({ content: 'header.top, .toolbar { position: static !important; }' });
    await page.locator(selector).screenshot({ path: path.join(outDir, `40-${tag}-${name}.png`) });
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
      const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
      const page = await context.newPage();
      const errors = [];
      page.on('pageerror', (e) => errors.push(String(e)));
      await page.goto(`${base}/?view=composition`);
      await page.waitForFunction(
        () => ['ready', 'error'].includes(document.querySelector('.composition-view')?.dataset.state),
        null,
        { timeout: 180000 },
      );

      await suite.test(`${tag} ${size}: a grid of ${n} × ${n} heads and the API's highest pairs`, async () => {
        assert.equal(await page.$eval('.composition-view', (e) => e.dataset.state), 'ready');
        const grid = await page.$eval('#composition-grid', (c) => ({ ...c.dataset }));
        assert.equal(Number(grid.n), n);
        assert.equal(grid.kind, 'Q');
        assert.deepEqual(api.body.shape, [L, H, L, H]);
        const shown = await page.$$eval('#composition-top .composition-pair', (els) =>
          els.map((e) => ({ sender: e.dataset.sender, receiver: e.dataset.receiver, score: Number(e.dataset.score) })),
        );
        assert.equal(shown.length, TOP);
        api.body.top.Q.forEach((p, i) => {
          assert.equal(shown[i].sender, `${p.sender.layer}.${p.sender.head}`);
          assert.equal(shown[i].receiver, `${p.receiver.layer}.${p.receiver.head}`);
          assert.equal(shown[i].score, p.score);
        });
        const mean = api.body.baseline.Q.mean.toFixed(3);
        assert.match(await page.textContent('#composition-baseline-tick'), new RegExp(`${mean} = random`));
        assert.match(await page.textContent('#composition-rope'), /RoPE.*not included/);
        assert.equal(await page.isVisible('#composition-gqa'), model.n_kv_head < model.n_head);
        if (viewport.width < 500) {
          const overflow = await page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
          assert.ok(overflow <= 1, `the page is ${overflow} px wider than the screen`);
        }
        await shot(page, '.composition-view', `${viewport.width}-grid`);
      });

      await suite.test(`${tag} ${size}: tooltips name the pair, its score and the baseline`, async () => {
        const best = api.body.top.Q[0];
        const i = best.sender.layer * H + best.sender.head,
          j = best.receiver.layer * H + best.receiver.head;
        await hoverCell(page, i, j);
        const tip = await page.textContent('.tooltip');
        const name = `L${best.sender.layer + 1} H${best.sender.head + 1} → L${best.receiver.layer + 1} H${best.receiver.head + 1}`;
        assert.ok(tip.includes(name), tip);
        assert.match(tip, new RegExp(`Q-composition ${best.score.toFixed(3)}: ×[\\d.]+ the random mean`));
        assert.match(tip, new RegExp(`random heads: ${api.body.baseline.Q.mean.toFixed(4)} ±`));
        // Row of the last layer, column of the first: no path.
        await hoverCell(page, n - 1, 0);
        assert.match(await page.textContent('.tooltip'), /no path: the receiver is not in a later layer/);
      });

      await suite.test(`${tag} ${size}: the kind selector redraws the grid and the list`, async () => {
        await page.selectOption('#composition-kind', 'K');
        await page.waitForSelector('#composition-grid[data-kind="K"]');
        const first = await page.$eval('#composition-top .composition-pair', (e) => [
          e.dataset.sender,
          e.dataset.receiver,
        ]);
        const k = api.body.top.K[0];
        assert.deepEqual(first, [`${k.sender.layer}.${k.sender.head}`, `${k.receiver.layer}.${k.receiver.head}`]);
        await hoverCell(page, k.sender.layer * H + k.sender.head, k.receiver.layer * H + k.receiver.head);
        assert.match(await page.textContent('.tooltip'), new RegExp(`K-composition ${k.score.toFixed(3)}`));
      });

      if (viewport.width > 500)
        await suite.test(`${tag} ${size}: the grid exports as SVG and PNG, the scores as JSON and CSV`, async () => {
          const save = async (button, name) => {
            await page.mouse.move(0, 0);
            const [download] = await Promise.all([page.waitForEvent('download'), page.click(button)]);
            const file = path.join(outDir, `40-${tag}-${name}`);
            await download.saveAs(file);
            return fs.readFileSync(file);
          };
          const svg = (await save('#export-svg', 'export.svg')).toString('utf8');
          assert.ok(svg.startsWith('<svg xmlns="http://www.w3.org/2000/svg"'));
          assert.ok(svg.includes('K-composition of'));
          // A small grid is one rect per pair of heads, a large one an embedded image.
          assert.ok(svg.includes('<image') || (svg.match(/<rect /g) ?? []).length > n * n, 'the grid is in the SVG');
          const png = await save('#export-png', 'export.png');
          assert.equal(png.subarray(1, 4).toString('latin1'), 'PNG');
          const json = JSON.parse((await save('#composition-json', 'composition.json')).toString('utf8'));
          assert.deepEqual(json.scores, api.body.scores);
          assert.deepEqual(json.top, api.body.top);
          const csv = (await save('#composition-csv', 'composition.csv'))
            .toString('utf8')
            .trim()
            .split('\n')
            .filter((l) => !l.startsWith('#'));
          assert.equal(csv[0], 'sender_layer,sender_head,receiver_layer,receiver_head,q,k,v');
          assert.equal(csv.length - 1, (H * H * L * (L - 1)) / 2);
        });

      if (viewport.width > 500)
        await suite.test(`${tag} ${size}: a selected pair is traced in the Patching view`, async () => {
          const k = api.body.top.K[0];
          const at = await cellPoint(page, k.sender.layer * H + k.sender.head, k.receiver.layer * H + k.receiver.head);
          await page.mouse.click(at.x, at.y);
          assert.match(
            await page.textContent('#composition-selected'),
            new RegExp(`index ${k.sender.layer}.${k.sender.head} → ${k.receiver.layer}.${k.receiver.head}`),
          );
          await page.click('#composition-trace');
          await page.waitForFunction(
            () => ['ready', 'error'].includes(document.querySelector('#patch-path')?.dataset.state),
            null,
            { timeout: 120000 },
          );
          assert.equal(
            await page.$eval('#patch-path', (e) => e.dataset.state),
            'ready',
            await page.textContent('#path-status'),
          );
          assert.match(await page.textContent('#path-title'), /through its keys/);
          assert.match(new URL(page.url()).searchParams.get('path') ?? '', /^\d+\.\d+,\d+\.\d+,k$/);
          const cells = await page.$$eval('#path-grid .patch-cell:not(.empty)', (els) =>
            els.map((e) => ({ layer: Number(e.dataset.layer), head: Number(e.dataset.head), n: e.dataset.normalised })),
          );
          assert.equal(cells.length, 1);
          assert.deepEqual([cells[0].layer, cells[0].head], [k.receiver.layer, k.receiver.head]);
          const request = {
            ...(await pairShown(page, model)),
            senders: [[k.sender.layer, k.sender.head]],
            receivers: [[k.receiver.layer, k.receiver.head]],
            input: 'k',
          };
          const traced = await post(base, '/api/patch', request);
          assert.equal(traced.status, 200, JSON.stringify(traced.body));
          assert.equal(Number(cells[0].n), traced.body.path.normalised);
          assert.match(await page.textContent('#path-direct'), /alone: normalised/);
          await shot(page, '#patch-path', `${viewport.width}-traced`);
          // A sweep of the user's own replaces the traced path, which then leaves the URL.
          await page.fill('#patch-layers', String(L));
          await page.click('#patch-run');
          await page.waitForFunction(() => document.querySelector('.patching-view')?.dataset.state === 'ready', null, {
            timeout: 120000,
          });
          await page.waitForFunction(() => !new URLSearchParams(location.search).has('path'));
          assert.equal(await page.isVisible('#patch-path'), false);
        });
      assert.deepEqual(errors, []);
      await context.close();
    }
  } finally {
    await browser.close();
  }
}
