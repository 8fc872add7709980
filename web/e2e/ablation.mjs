// Causal evidence in the explorer (issue 16, item 5) on one live server: importance badges on the
// layer tiles and in the head panel, "Ablate this head" on the trophy sentence (L4H2 as the page
// counts, index 3.1: the atlas's coreference head of all-MiniLM-L6-v2) equal to the API's number,
// the measured "Why several heads?" paragraphs, and a 390 × 844 screen. On a decoder (SmolLM2) the
// next-token prediction before → after. Screenshots go to test-results/ (prefix 16-<model>-).
import assert from 'node:assert/strict';
import path from 'node:path';
import { chromium } from 'playwright-core';
import { CHROMIUM_ARGS } from './browser.mjs';

const TROPHY = "The trophy didn't fit in the suitcase because it was too big.";
const LAYER = 3,
  HEAD = 1; // L4H2 as the page numbers heads (index 3.1)

async function post(base, pathName, body) {
  const res = await fetch(base + pathName, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: JSON.stringify(body),
  });
  assert.equal(res.status, 200, `${pathName}: ${res.status} ${await res.clone().text()}`);
  return res.json();
}

async function openTrophy(browser, base, viewport) {
  const context = await browser.newContext({ viewport, deviceScaleFactor: 1 });
  const page = await context.newPage();
  const errors = [];
  page.on('pageerror', (e) => errors.push(String(e)));
  await page.goto(`${base}/?text=${encodeURIComponent(TROPHY)}&layer=${LAYER}&head=${HEAD}&view=layer`);
  await page.waitForFunction(() => /^\d+$/.test(document.body.getAttribute('data-ready') ?? ''), null, {
    timeout: 120000,
  });
  return { context, page, errors };
}

/** Clicks "Ablate this head" in `mode` and returns the result element's data-effect. */
async function ablateInPage(page, mode, selector) {
  await page.selectOption('#ablate-mode', mode);
  await page.click('#ablate-go');
  await page.waitForSelector(selector, { timeout: 60000 });
  return page.$eval(selector, (el) => el.dataset);
}

export async function ablationTests(base, suite, outDir, { tag }) {
  const model = await (await fetch(base + '/api/model')).json();
  const n = model.n_layer * model.n_head;
  const shot = (page, name) => page.screenshot({ path: path.join(outDir, `16-${tag}-${name}.png`) });
  const browser = await chromium.launch({
    executablePath: process.env.CHROMIUM ?? '/usr/bin/chromium',
    args: CHROMIUM_ARGS,
  });
  try {
    const { context, page, errors } = await openTrophy(browser, base, { width: 1400, height: 900 });
    if (!model.causal) {
      await suite.test(`${tag} 1400×900: importance is measured by itself and badges every head`, async () => {
        await page.waitForFunction(() => document.body.getAttribute('data-importance') === 'ready', null, {
          timeout: 60000,
        });
        const imp = await post(base, '/api/importance', { text: TROPHY, truncate: true });
        const ranks = await page.$$eval('#head-grid .importance-badge', (els) =>
          els.map((e) => Number(e.dataset.rank)),
        );
        assert.equal(ranks.length, model.n_head);
        const inLayer = imp.importance.slice(LAYER * model.n_head, (LAYER + 1) * model.n_head);
        assert.deepEqual(
          inLayer.map((x) => [x.layer, x.head]),
          inLayer.map((_, i) => [LAYER, i]),
        );
        assert.deepEqual(
          ranks,
          inLayer.map((x) => x.rank),
        );
        const rank = Number(await page.getAttribute('#head-importance', 'data-rank'));
        assert.equal(rank, imp.importance[LAYER * model.n_head + HEAD].rank);
        assert.match(
          await page.textContent('#head-importance'),
          new RegExp(`importance #${rank} of ${n} \\(.* 1 − cos\\)`),
        );
      });
      await suite.test(`${tag}: ablating L4H2 changes the embedding by the API's 1 − cos`, async () => {
        const api = await post(base, '/api/ablate', {
          text: TROPHY,
          truncate: true,
          heads: [[LAYER, HEAD]],
          mode: 'zero',
        });
        const data = await ablateInPage(page, 'zero', '#ablate-distance');
        assert.ok(api.effect > 0, `1 − cos ${api.effect}`);
        assert.equal(Number(data.effect), api.effect);
        assert.equal(await page.$$eval('#ablate-layers .layer-change-bar', (els) => els.length), model.n_layer);
        const mean = await post(base, '/api/ablate', {
          text: TROPHY,
          truncate: true,
          heads: [[LAYER, HEAD]],
          mode: 'mean',
        });
        assert.equal(Number((await ablateInPage(page, 'mean', '#ablate-distance')).effect), mean.effect);
        await page.$eval('#ablate-box', (el) => el.scrollIntoView({ block: 'center' }));
        await shot(page, 'ablate-L4H2');
      });
      await suite.test(`${tag}: "Why several heads?" gives measured numbers`, async () => {
        await page.waitForSelector('#why-most-vs-least[data-least-effect]', { timeout: 60000 });
        const share = Number(await page.getAttribute('#why-concentration', 'data-top-share'));
        assert.ok(share > 0 && share <= 1, `top share ${share}`);
        assert.match(await page.textContent('#why-proxy'), /Spearman ρ = -?\d/);
        await page.$eval('#why-removal', (el) => el.scrollIntoView({ block: 'center' }));
        await shot(page, 'why-heads');
      });
    } else {
      await suite.test(
        `${tag} 1400×900: importance waits for the button; ablating shows the next token before → after`,
        async () => {
          assert.equal(await page.getAttribute('body', 'data-importance'), 'none');
          assert.ok(await page.$('#measure-importance'), 'no "Measure importance" button');
          const api = await post(base, '/api/ablate', {
            text: TROPHY,
            truncate: true,
            heads: [[LAYER, HEAD]],
            mode: 'zero',
          });
          const data = await ablateInPage(page, 'zero', '#ablate-next');
          assert.equal(data.before, api.next_before.text);
          assert.equal(data.after, api.next_after.text);
          assert.equal(Number(data.effect), api.effect);
          assert.match(await page.textContent('#ablate-loss'), /Mean next-token loss \d+\.\d+ → \d+\.\d+ nats/);
          await page.$eval('#ablate-box', (el) => el.scrollIntoView({ block: 'center' }));
          await shot(page, 'ablate-L4H2');
        },
      );
    }
    assert.deepEqual(errors, []);
    await context.close();

    if (!model.causal)
      await suite.test(`${tag} 390×844: badges and the ablation fit a phone`, async () => {
        const phone = await openTrophy(browser, base, { width: 390, height: 844 });
        await phone.page.waitForFunction(() => document.body.getAttribute('data-importance') === 'ready', null, {
          timeout: 60000,
        });
        await ablateInPage(phone.page, 'zero', '#ablate-distance');
        const overflow = await phone.page.evaluate(() => document.documentElement.scrollWidth - window.innerWidth);
        assert.ok(overflow <= 1, `the page is ${overflow} px wider than the screen`);
        await phone.page.$eval('#head-importance', (el) => el.scrollIntoView({ block: 'center' }));
        await shot(phone.page, 'phone');
        assert.deepEqual(phone.errors, []);
        await phone.context.close();
      });
  } finally {
    await browser.close();
  }
}
