// End-to-end tests of the explorer: the real `headscope serve` binary on the real default
// model, its HTTP API, and the web UI in Debian's Chromium. Run from web/: `node e2e/run.mjs`.
//   HEADSCOPE_BIN    the binary (default: ../build/headscope)
//   HEADSCOPE_MODEL  the model directory (default: ../models/all-MiniLM-L6-v2)
//   HEADSCOPE_DECODER_MODEL  a causal model with grouped-query attention for a short second pass
//                    (default: ../models/SmolLM2-135M-Instruct; "skip" leaves the pass out)
//   HEADSCOPE_LONG_MODEL  the model of the long-text pass: 8,192 tokens, streamed maps, zoom,
//                    tiles, and the model overview, Head lines and Compare heads drawn from them
//                    (default: ../models/SmolLM2-135M-Instruct; "skip" leaves it out). Its
//                    text comes from HEADSCOPE_LONG_TEXT (default: ../../shared/data/ud/en_ewt-ud-dev.conllu).
//                    The analysis takes minutes on two cores; timings go to test-results/long-timings.json.
//   HEADSCOPE_E2E_ONLY=explorer  only the first-minute-to-phone suite (explorer.mjs) on both models
//   HEADSCOPE_E2E_ONLY=decoder   only the short decoder pass (decoder.mjs) on HEADSCOPE_DECODER_MODEL
//   HEADSCOPE_E2E_ONLY=long      only the long-text pass
//   HEADSCOPE_E2E_ONLY=maps      only the weights / norm-weighted / rollout pass (maps.mjs) on both models
//   HEADSCOPE_E2E_ONLY=ablation  only the causal-evidence pass (ablation.mjs) on both models
//   HEADSCOPE_E2E_ONLY=window    only the sliding-window / multi-query pass on Gemma 3 (HEADSCOPE_WINDOW_MODEL)
//   HEADSCOPE_E2E_ONLY=patching  only the Patching and Logit lens pass (patching.mjs) on both models
//   HEADSCOPE_E2E_ONLY=composition  only the Composition pass (composition.mjs) on both models
//   HEADSCOPE_E2E_ONLY=gradients  only the gradients pass (gradients.mjs: attribution patching beside
//                    exact patching, edges, saliency) on both models, at 1400×900 and 390×844
//   HEADSCOPE_E2E_ONLY=headmap   only the Head map pass (headmap.mjs) on MiniLM, SmolLM2 and Gemma 3, and
//                    the corpus-evidence notice on a server whose cache holds no evidence
//   HEADSCOPE_E2E_ONLY=rough     only the rough-edges pass (rough.mjs) on MiniLM, SmolLM2 and Gemma 3
//                    (HEADSCOPE_WINDOW_MODEL), at 1400×900 and 390×844
//   HEADSCOPE_E2E_ONLY=twomodels  only "Compare models" (twomodels.mjs): one server with MiniLM and
//                    SmolLM2, one with MiniLM and Gemma 3 (HEADSCOPE_WINDOW_MODEL), one with MiniLM alone
//   CHROMIUM         the browser (default: /usr/bin/chromium)
// Screenshots, exported files and the server log go to web/test-results/.
import fs from 'node:fs';
import path from 'node:path';
import { fileURLToPath } from 'node:url';
import { ablationTests } from './ablation.mjs';
import { apiTests } from './api.mjs';
import { browserTests } from './browser.mjs';
import { compositionTests } from './composition.mjs';
import { decoderTests, windowTests } from './decoder.mjs';
import { explorerTests } from './explorer.mjs';
import { gradientsTests } from './gradients.mjs';
import { headMapTests, missingEvidenceTests } from './headmap.mjs';
import { failureReport, startServer, Suite } from './harness.mjs';
import { LONG_TOKENS, longTests, longText } from './long.mjs';
import { mapsTests } from './maps.mjs';
import { patchingTests } from './patching.mjs';
import { roughTests } from './rough.mjs';
import { singleModelTests, twoModelsTests } from './twomodels.mjs';

const webDir = path.resolve(path.dirname(fileURLToPath(import.meta.url)), '..');
const root = path.resolve(webDir, '..');
const bin = path.resolve(root, process.env.HEADSCOPE_BIN ?? 'build/headscope');
const model = path.resolve(root, process.env.HEADSCOPE_MODEL ?? 'models/all-MiniLM-L6-v2');
const decoderEnv = process.env.HEADSCOPE_DECODER_MODEL ?? 'models/SmolLM2-135M-Instruct';
const decoderModel = decoderEnv === 'skip' ? null : path.resolve(root, decoderEnv);
// A model with sliding-window layers and multi-query attention (Gemma 3 270M: 4 query heads on one KV head).
const windowEnv = process.env.HEADSCOPE_WINDOW_MODEL ?? 'models/gemma-3-270m';
const windowModel = windowEnv === 'skip' ? null : path.resolve(root, windowEnv);
const longEnv = process.env.HEADSCOPE_LONG_MODEL ?? 'models/SmolLM2-135M-Instruct';
const longModel = longEnv === 'skip' ? null : path.resolve(root, longEnv);
const longConllu = path.resolve(root, process.env.HEADSCOPE_LONG_TEXT ?? '../shared/data/ud/en_ewt-ud-dev.conllu');
const dist = path.join(webDir, 'dist');
// HEADSCOPE_E2E_ONLY=explorer: only the first-minute-to-phone suite (explorer.mjs), on both models.
const onlyExplorer = process.env.HEADSCOPE_E2E_ONLY === 'explorer';
// HEADSCOPE_E2E_ONLY=long: only the long-text pass.
const onlyLong = process.env.HEADSCOPE_E2E_ONLY === 'long';
// HEADSCOPE_E2E_ONLY=maps: only the maps toggle pass (maps.mjs).
const onlyMaps = process.env.HEADSCOPE_E2E_ONLY === 'maps';
// HEADSCOPE_E2E_ONLY=ablation: only the causal-evidence pass (ablation.mjs), on both models.
const onlyAblation = process.env.HEADSCOPE_E2E_ONLY === 'ablation';
// HEADSCOPE_E2E_ONLY=window: only the sliding-window / multi-query pass (Gemma 3).
const onlyWindow = process.env.HEADSCOPE_E2E_ONLY === 'window';
// HEADSCOPE_E2E_ONLY=patching: only the Patching and Logit lens pass (patching.mjs), on both models.
const onlyPatching = process.env.HEADSCOPE_E2E_ONLY === 'patching';
// HEADSCOPE_E2E_ONLY=composition: only the Composition pass (composition.mjs), on both models.
const onlyComposition = process.env.HEADSCOPE_E2E_ONLY === 'composition';
// HEADSCOPE_E2E_ONLY=gradients: only the gradients pass (gradients.mjs), on both models.
const onlyGradients = process.env.HEADSCOPE_E2E_ONLY === 'gradients';
// HEADSCOPE_E2E_ONLY=rough: only the rough-edges pass (rough.mjs), on the three models.
const onlyRough = process.env.HEADSCOPE_E2E_ONLY === 'rough';
// HEADSCOPE_E2E_ONLY=decoder: only the short decoder pass (decoder.mjs).
const onlyDecoder = process.env.HEADSCOPE_E2E_ONLY === 'decoder';
// HEADSCOPE_E2E_ONLY=headmap: only the Head map pass (headmap.mjs), on the three models.
const onlyHeadMap = process.env.HEADSCOPE_E2E_ONLY === 'headmap';
// HEADSCOPE_E2E_ONLY=twomodels: only the "Compare models" pass (twomodels.mjs), on two-model servers.
const onlyTwoModels = process.env.HEADSCOPE_E2E_ONLY === 'twomodels';
// Any HEADSCOPE_E2E_ONLY: the passes not named are left out.
const only =
  onlyExplorer ||
  onlyLong ||
  onlyMaps ||
  onlyAblation ||
  onlyWindow ||
  onlyPatching ||
  onlyComposition ||
  onlyGradients ||
  onlyRough ||
  onlyDecoder ||
  onlyHeadMap ||
  onlyTwoModels;
const outDir = path.join(webDir, 'test-results');

function fail(message) {
  console.error(`e2e: ${message}`);
  process.exit(1);
}

if (!fs.existsSync(bin)) fail(`no headscope binary at ${bin} (build it, or set HEADSCOPE_BIN)`);
if (!fs.existsSync(path.join(model, 'config.json')))
  fail(`no model at ${model} (run scripts/setup.sh, or set HEADSCOPE_MODEL)`);
if (decoderModel && !fs.existsSync(decoderModel))
  fail(`no decoder model at ${decoderModel} (run scripts/setup.sh, or set HEADSCOPE_DECODER_MODEL=skip)`);
if (windowModel && !fs.existsSync(windowModel))
  fail(`no sliding-window model at ${windowModel} (run scripts/setup.sh, or set HEADSCOPE_WINDOW_MODEL=skip)`);
if (!fs.existsSync(path.join(dist, 'index.html'))) fail(`no built UI at ${dist} (run \`npm run build\` in web/)`);
fs.rmSync(outDir, { recursive: true, force: true });
fs.mkdirSync(outDir, { recursive: true });

const log = fs.createWriteStream(path.join(outDir, 'server.log'));
log.path = path.join(outDir, 'server.log');
const server = await startServer({ bin, model, webDir: dist, log });
console.log(`e2e: ${bin} serving ${path.basename(model)} at ${server.url}`);
let ok = false;
/** A failure outside the tests (a server that exited), said now and again at the end. */
const problems = [];
const problem = (message) => {
  console.error(message);
  problems.push(message);
};
try {
  const apiSuite = new Suite('api');
  const uiSuite = new Suite('browser');
  if (!only) {
    console.log('API');
    await apiTests(server.url, apiSuite);
    console.log('Browser (Chromium)');
    await browserTests(server.url, uiSuite, outDir);
  }
  if (!only || onlyTwoModels) {
    console.log('Compare models on a server with one model');
    await singleModelTests(server.url, uiSuite, outDir);
  }
  const a = apiSuite.summary(),
    b = uiSuite.summary();
  ok = a && b;
  if (server.child.exitCode !== null) {
    problem(`e2e: the server exited (code ${server.child.exitCode}) during the tests`);
    ok = false;
  }
} finally {
  await server.stop();
  log.end();
}
if (decoderModel && (!only || onlyDecoder)) {
  // A second, short pass on a causal GQA model: its own server, its own log.
  const dlog = fs.createWriteStream(path.join(outDir, 'server-decoder.log'));
  dlog.path = path.join(outDir, 'server-decoder.log');
  const t0 = Date.now();
  const dserver = await startServer({ bin, model: decoderModel, webDir: dist, log: dlog });
  console.log(
    `Decoder (${path.basename(decoderModel)} at ${dserver.url}, started in ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
  try {
    const suite = new Suite('decoder');
    if (!onlyExplorer) await decoderTests(dserver.url, suite, outDir);
    ok = suite.summary() && ok;
    if (dserver.child.exitCode !== null) {
      problem(`e2e: the decoder server exited (code ${dserver.child.exitCode}) during the tests`);
      ok = false;
    }
  } finally {
    await dserver.stop();
    dlog.end();
  }
}
if (windowModel && (onlyWindow || !only)) {
  const wlog = fs.createWriteStream(path.join(outDir, 'server-window.log'));
  wlog.path = path.join(outDir, 'server-window.log');
  const t0 = Date.now();
  const wserver = await startServer({
    bin,
    model: windowModel,
    webDir: dist,
    log: wlog,
    args: ['--max-tokens', '1024'],
  });
  console.log(
    `Window and MQA (${path.basename(windowModel)} at ${wserver.url}, started in ${((Date.now() - t0) / 1000).toFixed(1)} s)`,
  );
  try {
    const suite = new Suite('window');
    // Generating in the page is covered on SmolLM2; on Gemma's 262K vocabulary it takes minutes here.
    await decoderTests(wserver.url, suite, outDir, 'gemma', { generateInPage: false });
    await windowTests(wserver.url, suite, outDir, longText(longConllu, 2800));
    ok = suite.summary() && ok;
    if (wserver.child.exitCode !== null) {
      problem(`e2e: the sliding-window server exited (code ${wserver.child.exitCode}) during the tests`);
      ok = false;
    }
  } finally {
    await wserver.stop();
    wlog.end();
  }
}
/** The first-minute-to-phone suite on its own server, whose token limit is small so that the
 *  "truncate to N tokens" path costs a short analysis, not a 512-token one. */
async function explorerPass(modelDir, tag, options = {}) {
  const xlog = fs.createWriteStream(path.join(outDir, `server-explorer-${tag}.log`));
  xlog.path = path.join(outDir, `server-explorer-${tag}.log`);
  const xserver = await startServer({ bin, model: modelDir, webDir: dist, log: xlog, args: ['--max-tokens', '64'] });
  console.log(`Explorer (${path.basename(modelDir)}, 1400×900 and 390×844, at ${xserver.url})`);
  try {
    const suite = new Suite(`explorer ${tag}`);
    await explorerTests(xserver.url, suite, outDir, { tag, folder: path.basename(modelDir), ...options });
    ok = suite.summary() && ok;
  } finally {
    await xserver.stop();
    xlog.end();
  }
}
if (!only || onlyExplorer) await explorerPass(model, 'minilm');
// The truncation test once (on the encoder): on SmolLM2 it costs half a minute on two cores.
if (decoderModel && (!only || onlyExplorer)) await explorerPass(decoderModel, 'smollm2', { truncate: false });
/** The maps toggle on its own server: the full check on the encoder, a quick one on the decoder. */
async function mapsPass(modelDir, tag, quick) {
  const mlog = fs.createWriteStream(path.join(outDir, `server-maps-${tag}.log`));
  mlog.path = path.join(outDir, `server-maps-${tag}.log`);
  const mserver = await startServer({ bin, model: modelDir, webDir: dist, log: mlog, args: ['--max-tokens', '64'] });
  console.log(`Maps toggle (${path.basename(modelDir)} at ${mserver.url})`);
  try {
    const suite = new Suite(`maps ${tag}`);
    await mapsTests(mserver.url, suite, outDir, { tag, quick });
    ok = suite.summary() && ok;
  } finally {
    await mserver.stop();
    mlog.end();
  }
}
if (!only || onlyMaps) {
  await mapsPass(model, 'minilm', false);
  if (decoderModel) await mapsPass(decoderModel, 'smollm2', true);
}
/** The causal-evidence pass (ablation.mjs) on its own server. */
async function ablationPass(modelDir, tag) {
  const alog = fs.createWriteStream(path.join(outDir, `server-ablation-${tag}.log`));
  alog.path = path.join(outDir, `server-ablation-${tag}.log`);
  const aserver = await startServer({ bin, model: modelDir, webDir: dist, log: alog, args: ['--max-tokens', '64'] });
  console.log(`Ablation (${path.basename(modelDir)} at ${aserver.url})`);
  try {
    const suite = new Suite(`ablation ${tag}`);
    await ablationTests(aserver.url, suite, outDir, { tag });
    ok = suite.summary() && ok;
  } finally {
    await aserver.stop();
    alog.end();
  }
}
if (!only || onlyAblation) await ablationPass(model, 'minilm');
if (decoderModel && (!only || onlyAblation)) await ablationPass(decoderModel, 'smollm2');
/** The Patching and Logit lens pass (patching.mjs) on its own server. */
async function patchingPass(modelDir, tag) {
  const plog = fs.createWriteStream(path.join(outDir, `server-patching-${tag}.log`));
  plog.path = path.join(outDir, `server-patching-${tag}.log`);
  const pserver = await startServer({ bin, model: modelDir, webDir: dist, log: plog, args: ['--max-tokens', '64'] });
  console.log(`Patching and logit lens (${path.basename(modelDir)}, 1400×900 and 390×844, at ${pserver.url})`);
  try {
    const suite = new Suite(`patching ${tag}`);
    await patchingTests(pserver.url, suite, outDir, { tag });
    ok = suite.summary() && ok;
  } finally {
    await pserver.stop();
    plog.end();
  }
}
if (!only || onlyPatching) await patchingPass(model, 'minilm');
if (decoderModel && (!only || onlyPatching)) await patchingPass(decoderModel, 'smollm2');
/** The Composition pass (composition.mjs) on its own server. */
async function compositionPass(modelDir, tag) {
  const clog = fs.createWriteStream(path.join(outDir, `server-composition-${tag}.log`));
  clog.path = path.join(outDir, `server-composition-${tag}.log`);
  const cserver = await startServer({ bin, model: modelDir, webDir: dist, log: clog, args: ['--max-tokens', '64'] });
  console.log(`Composition (${path.basename(modelDir)}, 1400×900 and 390×844, at ${cserver.url})`);
  try {
    const suite = new Suite(`composition ${tag}`);
    await compositionTests(cserver.url, suite, outDir, { tag });
    ok = suite.summary() && ok;
  } finally {
    await cserver.stop();
    clog.end();
  }
}
if (!only || onlyComposition) await compositionPass(model, 'minilm');
if (decoderModel && (!only || onlyComposition)) await compositionPass(decoderModel, 'smollm2');
/** The gradients pass (gradients.mjs) on its own server. */
async function gradientsPass(modelDir, tag) {
  const glog = fs.createWriteStream(path.join(outDir, `server-gradients-${tag}.log`));
  glog.path = path.join(outDir, `server-gradients-${tag}.log`);
  const gserver = await startServer({ bin, model: modelDir, webDir: dist, log: glog, args: ['--max-tokens', '64'] });
  console.log(`Gradients (${path.basename(modelDir)}, 1400×900 and 390×844, at ${gserver.url})`);
  try {
    const suite = new Suite(`gradients ${tag}`);
    await gradientsTests(gserver.url, suite, outDir, { tag });
    ok = suite.summary() && ok;
    if (gserver.child.exitCode !== null) {
      problem(`e2e: the gradients server exited (code ${gserver.child.exitCode}) during the tests`);
      ok = false;
    }
  } finally {
    await gserver.stop();
    glog.end();
  }
}
if (!only || onlyGradients) await gradientsPass(model, 'minilm');
if (decoderModel && (!only || onlyGradients)) await gradientsPass(decoderModel, 'smollm2');
/** The rough-edges pass (rough.mjs) on its own server: a small token limit, so that the
 *  importance refusal and Truncate cost short analyses. */
async function roughPass(modelDir, tag, options, maxTokens = 64) {
  const rlog = fs.createWriteStream(path.join(outDir, `server-rough-${tag}.log`));
  rlog.path = path.join(outDir, `server-rough-${tag}.log`);
  const rserver = await startServer({
    bin,
    model: modelDir,
    webDir: dist,
    log: rlog,
    args: ['--max-tokens', String(maxTokens)],
  });
  console.log(`Rough edges (${path.basename(modelDir)}, 1400×900 and 390×844, at ${rserver.url})`);
  try {
    const suite = new Suite(`rough ${tag}`);
    await roughTests(rserver.url, suite, outDir, { tag, ...options });
    ok = suite.summary() && ok;
  } finally {
    await rserver.stop();
    rlog.end();
  }
}
if (!only || onlyRough) {
  await roughPass(model, 'minilm', { truncate: true });
  if (decoderModel) await roughPass(decoderModel, 'smollm2', { generate: true });
  // Gemma 3: 72 heads, so importance is refused past 227 tokens; the server reads up to 256.
  if (windowModel) await roughPass(windowModel, 'gemma', {}, 256);
}
/** The Head map pass (headmap.mjs) on its own server; `args` adds server options. */
async function headMapPass(modelDir, tag, run, args = []) {
  const hlog = fs.createWriteStream(path.join(outDir, `server-headmap-${tag}.log`));
  hlog.path = path.join(outDir, `server-headmap-${tag}.log`);
  const hserver = await startServer({
    bin,
    model: modelDir,
    webDir: dist,
    log: hlog,
    args: ['--max-tokens', '64', ...args],
  });
  console.log(`Head map (${path.basename(modelDir)}, ${tag}, at ${hserver.url})`);
  try {
    const suite = new Suite(`head map ${tag}`);
    await run(hserver.url, suite);
    ok = suite.summary() && ok;
  } finally {
    await hserver.stop();
    hlog.end();
  }
}
if (!only || onlyHeadMap) {
  const mapTests = (tag) => (url, suite) => headMapTests(url, suite, outDir, { tag });
  await headMapPass(model, 'minilm', mapTests('minilm'));
  if (decoderModel) await headMapPass(decoderModel, 'smollm2', mapTests('smollm2'));
  if (windowModel) await headMapPass(windowModel, 'gemma', mapTests('gemma'));
  // A cache folder with no corpus evidence in it: the page says so and how to measure it.
  const empty = fs.mkdtempSync(path.join(outDir, 'no-evidence-'));
  await headMapPass(model, 'no-evidence', (url, suite) => missingEvidenceTests(url, suite, outDir), [
    '--evidence-cache',
    empty,
  ]);
  fs.rmSync(empty, { recursive: true, force: true });
}
/** "Compare models" (twomodels.mjs) on a server with two models: MiniLM and `second`. */
async function twoModelsPass(second, tag, options = {}) {
  const tlog = fs.createWriteStream(path.join(outDir, `server-twomodels-${tag}.log`));
  tlog.path = path.join(outDir, `server-twomodels-${tag}.log`);
  const tserver = await startServer({
    bin,
    model,
    webDir: dist,
    log: tlog,
    args: ['--model', second, '--max-tokens', '256'],
  });
  console.log(`Compare models (${path.basename(model)} and ${path.basename(second)} at ${tserver.url})`);
  try {
    const suite = new Suite(`twomodels ${tag}`);
    await twoModelsTests(tserver.url, suite, outDir, { tag, ...options });
    ok = suite.summary() && ok;
    if (tserver.child.exitCode !== null) {
      problem(`e2e: the two-model server exited (code ${tserver.child.exitCode}) during the tests`);
      ok = false;
    }
  } finally {
    await tserver.stop();
    tlog.end();
  }
}
if (!only || onlyTwoModels) {
  if (decoderModel) await twoModelsPass(decoderModel, 'smollm2');
  if (windowModel) await twoModelsPass(windowModel, 'gemma', { quick: true });
}
if (only && !onlyLong) {
  // the long-text pass is left out
} else if (longModel && !fs.existsSync(longConllu)) {
  console.log(`Long text: skipped, no treebank at ${longConllu} (set HEADSCOPE_LONG_TEXT)`);
} else if (longModel) {
  const llog = fs.createWriteStream(path.join(outDir, 'server-long.log'));
  llog.path = path.join(outDir, 'server-long.log');
  const lserver = await startServer({
    bin,
    model: longModel,
    webDir: dist,
    log: llog,
    args: ['--max-tokens', String(LONG_TOKENS)],
  });
  console.log(`Long text (${path.basename(longModel)}, ${LONG_TOKENS} tokens, at ${lserver.url})`);
  const timings = {};
  try {
    const suite = new Suite('long');
    await longTests(lserver.url, suite, outDir, longText(longConllu), timings);
    ok = suite.summary() && ok;
    if (lserver.child.exitCode !== null) {
      problem(`e2e: the long-text server exited (code ${lserver.child.exitCode}) during the tests`);
      ok = false;
    }
  } finally {
    fs.writeFileSync(path.join(outDir, 'long-timings.json'), JSON.stringify(timings, null, 2) + '\n');
    console.log(`  timings: ${JSON.stringify(timings)}`);
    await lserver.stop();
    llog.end();
  }
}
console.log(`e2e: screenshots and exports in ${path.relative(process.cwd(), outDir) || outDir}`);
const report = failureReport();
if (report) console.log(report);
for (const p of problems) console.log(p);
if (!ok && !report && problems.length === 0) console.log('e2e: failed outside a test (see above)');
process.exit(ok ? 0 : 1);
