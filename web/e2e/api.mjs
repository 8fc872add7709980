// API checks against the live server: contract, numbers cross-checked between endpoints, and
// every kind of bad request answered with a clear 4xx JSON error while the server stays up.
import assert from 'node:assert/strict';
import net from 'node:net';
import { decodeB64, decodeTensor } from './harness.mjs';

export const SENTENCE = "The animal didn't cross the street because it was too tired.";
/** Rare words that WordPiece splits into several pieces. */
export const SPLIT_WORDS = 'Unbelievably, the photosynthesising microorganisms outcompeted everything else.';

async function post(base, path, body, raw = false) {
  const res = await fetch(base + path, {
    method: 'POST',
    headers: { 'Content-Type': 'application/json' },
    body: raw ? body : JSON.stringify(body),
  });
  const type = res.headers.get('content-type') ?? '';
  const payload = type.includes('json') ? await res.json() : Buffer.from(await res.arrayBuffer());
  return { status: res.status, type, payload };
}

async function expectError(base, path, body, status, code, raw = false) {
  const r = await post(base, path, body, raw);
  assert.equal(
    r.status,
    status,
    `${path} ${raw ? '(raw)' : JSON.stringify(body).slice(0, 80)}: status ${r.status}, body ${JSON.stringify(r.payload).slice(0, 200)}`,
  );
  assert.ok(r.type.includes('application/json'), 'errors are JSON');
  assert.equal(r.payload.error.status, status);
  if (code) assert.equal(r.payload.error.code, code, r.payload.error.message);
  assert.ok(r.payload.error.message.length > 10, 'the message says what is wrong');
  await expectAlive(base);
  return r.payload.error;
}

export async function expectAlive(base) {
  const res = await fetch(base + '/api/health');
  assert.equal(res.status, 200, 'server still answers after the bad request');
  return res.json();
}

/** The lesson's statistics recomputed from the attention tensor (formulas: docs/metrics.md). */
export function lessonStats(A, T, sparsityFraction) {
  let entropy = 0,
    max = 0,
    avg = 0,
    sparse = 0;
  for (let q = 0; q < T; q++) {
    let h = 0,
      m = 0,
      s2 = 0,
      small = 0;
    for (let k = 0; k < T; k++) {
      const a = A[q * T + k];
      if (a > 0) h -= a * Math.log2(a);
      m = Math.max(m, a);
      s2 += a * a;
      if (a < sparsityFraction / T) small++;
    }
    entropy += h;
    max += m;
    avg += s2;
    sparse += small / T;
  }
  return { entropy_bits: entropy / T, max_attention: max / T, avg_attention: avg / T, sparsity: sparse / T };
}

export async function apiTests(base, suite) {
  let model, run;

  await suite.test('GET /api/model describes the default model', async () => {
    model = await (await fetch(base + '/api/model')).json();
    assert.equal(model.architecture, 'bert');
    assert.equal(model.n_layer, 6);
    assert.equal(model.n_head, 12);
    assert.equal(model.d_model, 384);
    assert.equal(model.d_head, 32);
    assert.deepEqual(model.w_o_shape, [384, 384]);
    assert.equal(model.limits.max_tokens, 512);
    assert.deepEqual(model.kv_head_of, [...Array(12).keys()]);
    assert.ok(
      model.roles.length >= 10 &&
        model.roles.every(
          (r) => r.id && r.name && r.description && r.typical_function && /^#[0-9a-f]{6}$/.test(r.color),
        ),
    );
  });

  await suite.test('POST /api/run returns tokens, words, statistics and roles of all 72 heads', async () => {
    const r = await post(base, '/api/run', { text: SENTENCE });
    assert.equal(r.status, 200);
    run = r.payload;
    const tokens = run.tokens.map((t) => t.text);
    assert.deepEqual(tokens.slice(0, 4), ['[CLS]', 'the', 'animal', 'didn']);
    assert.equal(tokens.at(-1), '[SEP]');
    assert.equal(run.n_tokens, tokens.length);
    assert.equal(run.heads.length, 72);
    // BERT's pre-tokenizer splits at punctuation, so "didn't" is three words of one token each.
    assert.deepEqual(
      run.words.slice(3, 6).map((w) => w.text),
      ['didn', "'", 't'],
    );
    for (const h of run.heads) {
      assert.ok(h.stats.entropy_norm >= 0 && h.stats.entropy_norm <= 1);
      assert.ok(h.roles.primary.id && h.roles.primary.evidence.length > 0);
    }
  });

  await suite.test('statistics agree with the attention tensor sent as binary', async () => {
    const r = await post(base, '/api/attention', { text: SENTENCE });
    assert.equal(r.type, 'application/octet-stream');
    const att = decodeTensor(r.payload);
    const T = run.n_tokens;
    assert.deepEqual(att.shape, [6, 12, T, T]);
    for (let i = 0; i < 72; i++) {
      const A = att.data.subarray(i * T * T, (i + 1) * T * T);
      for (let q = 0; q < T; q++) {
        let s = 0;
        for (let k = 0; k < T; k++) s += A[q * T + k];
        assert.ok(Math.abs(s - 1) < 1e-4, `head ${i} row ${q} sums to ${s}`);
      }
      const mine = lessonStats(A, T, model.statistics.sparsity_fraction);
      for (const [k, v] of Object.entries(mine))
        assert.ok(
          Math.abs(run.heads[i].stats[k] - v) < 1e-5,
          `head ${i} ${k}: API ${run.heads[i].stats[k]}, recomputed ${v}`,
        );
    }
  });

  await suite.test('one layer, one head, and 8-bit attention', async () => {
    const full = decodeTensor((await post(base, '/api/attention', { text: SENTENCE, layer: 2 })).payload);
    const one = decodeTensor((await post(base, '/api/attention', { text: SENTENCE, layer: 2, head: 7 })).payload);
    const u8 = decodeTensor((await post(base, '/api/attention', { text: SENTENCE, layer: 2, dtype: 'uint8' })).payload);
    const T = run.n_tokens;
    assert.deepEqual(one.shape, [1, 1, T, T]);
    assert.equal(u8.dtype, 2);
    for (let i = 0; i < T * T; i++) {
      assert.equal(one.data[i], full.data[7 * T * T + i]);
      assert.ok(Math.abs(u8.data[i] - full.data[i]) <= 0.5 / 255 + 1e-7);
    }
  });

  await suite.test('word level: merged attention and word statistics', async () => {
    const words = (await post(base, '/api/run', { text: SPLIT_WORDS, level: 'word' })).payload;
    const att = decodeTensor(
      (await post(base, '/api/attention', { text: SPLIT_WORDS, level: 'word', layer: 0 })).payload,
    );
    const U = words.n_units;
    assert.equal(U, words.words.length);
    assert.ok(U < words.n_tokens, `${U} words from ${words.n_tokens} tokens`);
    const micro = words.words.find((w) => w.text === 'microorganisms');
    assert.ok(micro && micro.tokens.length > 1, 'the pieces of a word are merged into it');
    assert.deepEqual(att.shape, [1, 12, U, U]);
    const mine = lessonStats(att.data.subarray(0, U * U), U, model.statistics.sparsity_fraction);
    assert.ok(Math.abs(words.heads[0].stats.max_attention - mine.max_attention) < 1e-5);
  });

  await suite.test('special tokens hidden: statistics of the renormalised matrices', async () => {
    const plain = (await post(base, '/api/run', { text: SENTENCE, special: 'hide' })).payload;
    assert.equal(plain.special, 'hide');
    const T = run.n_tokens,
      K = plain.n_units;
    assert.equal(K, T - 2, 'without [CLS] and [SEP]');
    const att = decodeTensor((await post(base, '/api/attention', { text: SENTENCE })).payload);
    for (const i of [0, 17, 40, 71]) {
      // Drop rows and columns 0 and T-1, rescale every row to sum to one, recompute.
      const A = new Float64Array(K * K);
      for (let q = 0; q < K; q++) {
        let s = 0;
        for (let k = 0; k < K; k++) s += att.data[i * T * T + (q + 1) * T + (k + 1)];
        for (let k = 0; k < K; k++) A[q * K + k] = att.data[i * T * T + (q + 1) * T + (k + 1)] / s;
      }
      const mine = lessonStats(A, K, model.statistics.sparsity_fraction);
      for (const [k, v] of Object.entries(mine))
        assert.ok(
          Math.abs(plain.heads[i].stats[k] - v) < 1e-5,
          `head ${i} ${k}: API ${plain.heads[i].stats[k]}, recomputed ${v}`,
        );
    }
    await expectError(base, '/api/run', { text: SENTENCE, special: 'drop' }, 400, 'bad_field');
  });

  await suite.test('W_O decomposition: concat, projection and contributions add up to the output', async () => {
    const r = await post(base, '/api/decompose', { text: SENTENCE, layer: 3, token: 8 });
    assert.equal(r.status, 200);
    const d = r.payload;
    assert.deepEqual(d.head_outputs.shape, [12, 32]);
    assert.deepEqual(d.contributions.shape, [12, 384]);
    const heads = decodeB64(d.head_outputs),
      concat = decodeB64(d.concat),
      proj = decodeB64(d.projection);
    const bias = decodeB64(d.bias),
      contrib = decodeB64(d.contributions),
      norms = decodeB64(d.contribution_norms);
    const out = decodeB64(d.attn_output);
    assert.deepEqual(Array.from(concat), Array.from(heads), 'concat is the head outputs side by side');
    let worstSum = 0,
      worstProj = 0;
    for (let o = 0; o < 384; o++) {
      let s = bias[o];
      for (let h = 0; h < 12; h++) s += contrib[h * 384 + o];
      worstSum = Math.max(worstSum, Math.abs(s - out[o]));
      worstProj = Math.max(worstProj, Math.abs(proj[o] + bias[o] - out[o]));
    }
    assert.ok(worstSum < 1e-4, `Σ contributions + b differs from the output by ${worstSum}`);
    assert.ok(worstProj < 1e-4, `W_O·concat + b differs from the output by ${worstProj}`);
    for (let h = 0; h < 12; h++) {
      let n2 = 0;
      for (let o = 0; o < 384; o++) n2 += contrib[h * 384 + o] ** 2;
      assert.ok(Math.abs(Math.sqrt(n2) - norms[h]) < 1e-4 * Math.max(1, norms[h]));
    }
    // The attention rows for token 8 are row 8 of layer 3's matrices.
    const att = decodeTensor((await post(base, '/api/attention', { text: SENTENCE, layer: 3 })).payload);
    const rows = decodeB64(d.attention_rows),
      T = run.n_tokens;
    for (let h = 0; h < 12; h++)
      for (let k = 0; k < T; k++)
        assert.equal(Math.fround(rows[h * T + k]), Math.fround(att.data[(h * T + 8) * T + k]));
  });

  await suite.test('malformed JSON → 400 bad_json', async () => {
    await expectError(base, '/api/run', '{"text": "unfinished', 400, 'bad_json', true);
    await expectError(base, '/api/run', '', 400, 'bad_json', true);
    await expectError(base, '/api/run', '[1, 2, 3]', 400, 'bad_request', true);
    await expectError(base, '/api/run', '{"text": "\\ud800"}', 400, 'bad_json', true);
  });

  await suite.test('missing, mistyped and unknown fields → 400', async () => {
    await expectError(base, '/api/run', {}, 400, 'missing_field');
    await expectError(base, '/api/run', { text: 5 }, 400, 'bad_field');
    await expectError(base, '/api/run', { text: 'hi', level: 'letters' }, 400, 'bad_field');
    await expectError(base, '/api/run', { text: 'hi', txet: 'typo' }, 400, 'unknown_field');
    await expectError(base, '/api/run', { text: '   ' }, 400, 'empty_text');
    await expectError(base, '/api/attention', { text: 'hi', layer: '2' }, 400, 'bad_field');
    await expectError(base, '/api/decompose', { text: 'hi', layer: 0 }, 400, 'missing_field');
  });

  await suite.test('unknown layer, head or token → 400 naming the valid range', async () => {
    const e = await expectError(base, '/api/attention', { text: SENTENCE, layer: 6 }, 400, 'unknown_layer');
    assert.match(e.message, /0 to 5/);
    await expectError(base, '/api/attention', { text: SENTENCE, layer: -1 }, 400, 'unknown_layer');
    await expectError(base, '/api/attention', { text: SENTENCE, layer: 0, head: 12 }, 400, 'unknown_head');
    await expectError(base, '/api/attention', { text: SENTENCE, layer: 99999999999 }, 400, 'unknown_layer');
    await expectError(base, '/api/decompose', { text: SENTENCE, layer: 7, token: 0 }, 400, 'unknown_layer');
    await expectError(base, '/api/decompose', { text: SENTENCE, layer: 0, token: 999 }, 400, 'unknown_token');
  });

  await suite.test('invalid UTF-8 → 400 invalid_utf8', async () => {
    const body = Buffer.concat([Buffer.from('{"text": "caf'), Buffer.from([0xc3, 0x28]), Buffer.from('"}')]);
    const e = await expectError(base, '/api/run', body, 400, 'invalid_utf8', true);
    assert.match(e.message, /offset 13/);
    await expectError(base, '/api/run', Buffer.from([0x7b, 0xff, 0xfe, 0x7d]), 400, 'invalid_utf8', true);
    // An overlong encoding of "/" (C0 AF) is not UTF-8 either.
    await expectError(
      base,
      '/api/run',
      Buffer.concat([Buffer.from('{"text":"'), Buffer.from([0xc0, 0xaf]), Buffer.from('"}')]),
      400,
      'invalid_utf8',
      true,
    );
  });

  await suite.test('oversize text → 413, unless truncation is asked for', async () => {
    await expectError(base, '/api/run', { text: 'word '.repeat(20000) }, 413, 'text_too_long');
    const long = 'the cat sat on the mat. '.repeat(120); // ≈ 840 tokens
    const e = await expectError(base, '/api/run', { text: long }, 413, 'text_too_long');
    assert.match(e.message, /is \d+ tokens; at most 512 are allowed/);
    const r = await post(base, '/api/run', { text: long, truncate: true });
    assert.equal(r.status, 200);
    assert.equal(r.payload.truncated, true);
    assert.equal(r.payload.n_tokens, 512);
  });

  await suite.test('request body over the server limit → 413 JSON', async () => {
    const res = await fetch(base + '/api/run', { method: 'POST', body: 'x'.repeat(2 * 1024 * 1024) }).catch((e) => e);
    // The server may answer before reading the whole body; either way it must stay up.
    if (!(res instanceof Error)) {
      assert.equal(res.status, 413);
      assert.equal((await res.json()).error.code, 'body_too_large');
    }
    await expectAlive(base);
  });

  await suite.test('/api/generate on an encoder → 400 not_causal', async () => {
    const r = await fetch(base + '/api/generate', {
      method: 'POST',
      headers: { 'Content-Type': 'application/json' },
      body: JSON.stringify({ text: 'The cat sat', max_new_tokens: 4 }),
    });
    assert.equal(r.status, 400);
    assert.equal((await r.json()).error.code, 'not_causal');
  });

  await suite.test('unknown path and wrong method → 404 JSON', async () => {
    const r = await fetch(base + '/api/nothing');
    assert.equal(r.status, 404);
    assert.equal((await r.json()).error.code, 'not_found');
    const g = await fetch(base + '/api/run');
    assert.ok(g.status >= 400 && g.status < 500);
    await expectAlive(base);
  });

  await suite.test('concurrent clients: 24 requests at once, every answer right, each text run once', async () => {
    // Three texts (the server keeps four runs), each asked for by eight clients at the same time.
    const texts = Array.from({ length: 3 }, (_, i) => `Client ${i} asks about head ${i} while the others wait.`);
    const before = (await expectAlive(base)).runs_computed;
    const requests = [];
    for (let c = 0; c < 8; c++)
      for (const [i, text] of texts.entries()) {
        if (c % 2 === 0) requests.push(post(base, '/api/run', { text }).then((r) => ['run', i, r]));
        else requests.push(post(base, '/api/attention', { text, layer: i % 6 }).then((r) => ['att', i, r]));
      }
    requests.push(post(base, '/api/run', { text: 'x', level: 'bogus' }).then((r) => ['bad', -1, r]));
    const results = await Promise.all(requests);
    const runs = new Map();
    for (const [kind, i, r] of results) {
      if (kind === 'bad') {
        assert.equal(r.status, 400);
        continue;
      }
      assert.equal(r.status, 200, `${kind} ${i}: ${r.status}`);
      if (kind === 'run') {
        assert.equal(r.payload.text, texts[i]);
        const key = JSON.stringify(r.payload.heads);
        if (runs.has(i)) assert.equal(runs.get(i), key, 'the same text gives the same answer to every client');
        runs.set(i, key);
      } else {
        const t = decodeTensor(r.payload);
        assert.equal(t.shape[1], 12);
      }
    }
    const after = (await expectAlive(base)).runs_computed;
    assert.equal(after - before, texts.length, 'each distinct text is computed once; the rest come from the cache');
  });
  await suite.test(
    'hostile requests: each refused with JSON, the server stays up (docs/api.md, "Who may call the API")',
    async () => {
      const port = new URL(base).port;
      // Raw bytes over a socket, for what fetch will not send (a foreign Host, an undecodable path).
      const raw = (request) =>
        new Promise((resolve, reject) => {
          const socket = net.connect(Number(port), '127.0.0.1', () => socket.write(request));
          let data = '';
          socket.setEncoding('latin1');
          socket.on('data', (d) => {
            data += d;
            const end = data.indexOf('\r\n\r\n');
            const m = /content-length: (\d+)/i.exec(data);
            if (end >= 0 && m && data.length >= end + 4 + Number(m[1])) {
              socket.destroy();
              resolve({
                status: Number(data.slice(9, 12)),
                head: data.slice(0, end),
                body: JSON.parse(data.slice(end + 4)),
              });
            }
          });
          socket.on('error', reject);
          socket.setTimeout(10000, () => reject(new Error('no reply')));
        });
      const ff = await raw('GET /%ff HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n');
      assert.equal(ff.status, 404);
      assert.equal(ff.body.error.code, 'not_found');
      const rebound = await raw('GET /api/model HTTP/1.1\r\nHost: attacker.example\r\n\r\n');
      assert.equal(rebound.status, 403);
      assert.equal(rebound.body.error.code, 'forbidden_host');
      const cross = await raw(
        `POST /api/run HTTP/1.1\r\nHost: 127.0.0.1:${port}\r\nOrigin: http://evil.example\r\nContent-Type: application/json\r\nContent-Length: 13\r\n\r\n{"text":"hi"}`,
      );
      assert.equal(cross.status, 403);
      assert.equal(cross.body.error.code, 'forbidden_origin');
      const plain = await fetch(base + '/api/run', {
        method: 'POST',
        headers: { 'Content-Type': 'text/plain' },
        body: JSON.stringify({ text: 'hi' }),
      });
      assert.equal(plain.status, 415);
      assert.equal((await plain.json()).error.code, 'unsupported_media_type');
      const put = await fetch(base + '/api/run', {
        method: 'PUT',
        headers: { 'Content-Type': 'application/json' },
        body: '{}',
      });
      assert.equal(put.status, 405);
      assert.equal(put.headers.get('allow'), 'POST');
      await expectError(base, '/api/attention', '{"text": "hi", "layer": 1e999}', 400, 'bad_json', true);
      await expectAlive(base);
    },
  );
}
