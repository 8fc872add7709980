import { describe, expect, it } from 'vitest';
import { ApiError, type HeadReport, type RunResult } from './api';
import { checkPayload, EMBED_SCHEMA, EmbeddedClient, embeddedModel, type EmbedPayload } from './embedded';
import { STATISTICS_CATALOGUE } from './statistics-catalogue.fixture';
import { bytesToBase64 } from './wire';

/** A payload of 2 layers × 2 heads over 3 tokens; cell (l, h, q, k) holds 1000·l + 100·h + 10·q + k
 *  (not attention, which these tests do not need: they check where each value lands). */
function payload(over: Partial<EmbedPayload> = {}): EmbedPayload {
  const [L, H, T] = [2, 2, 3];
  const values = new Float32Array(L * H * T * T);
  for (let l = 0; l < L; l++)
    for (let h = 0; h < H; h++)
      for (let q = 0; q < T; q++)
        for (let k = 0; k < T; k++) values[((l * H + h) * T + q) * T + k] = 1000 * l + 100 * h + 10 * q + k;
  const role = {
    id: 'previous_token',
    name: 'Previous token',
    score: 0.9,
    detail: '',
    label: 'Previous token',
    evidence: '',
  };
  const heads = Array.from(
    { length: L * H },
    (_, i) =>
      ({
        layer: Math.floor(i / H),
        head: i % H,
        roles: { primary: role, secondary: role, confidence: 1, margin: 1, scores: [role] },
      }) as unknown as HeadReport,
  );
  const run = {
    schema: 'headscope.run/2',
    text: 'a b c',
    level: 'token',
    n_tokens: T,
    heads,
    model: { name: 'tiny', causal: true },
  } as unknown as RunResult;
  return {
    schema: EMBED_SCHEMA,
    run,
    attention: { shape: [L, H, T, T], dtype: 'float32', data: bytesToBase64(new Uint8Array(values.buffer)) },
    ...over,
  };
}

describe('EmbeddedClient', () => {
  it('serves one layer of the embedded attention, and all layers', async () => {
    const api = new EmbeddedClient(payload());
    const layer1 = await api.attention('a b c', 'token', 1);
    expect(layer1.shape).toEqual([1, 2, 3, 3]);
    expect(layer1.data[0]).toBe(1000);
    expect(layer1.data[9 + 2 * 3 + 1]).toBe(1121); // head 1, query 2, key 1
    expect((await api.attention('a b c', 'token', null, 'uint8')).shape).toEqual([2, 2, 3, 3]);
    expect(await api.run('a b c', 'token')).toBe(api.payload.run);
  });

  it('refuses what needs the model, saying so', async () => {
    const api = new EmbeddedClient(payload());
    await expect(api.ablate('a b c', [[0, 0]])).rejects.toThrow(/ablation needs the model/);
    await expect(api.decompose('a b c', 0, 1)).rejects.toBeInstanceOf(ApiError);
    await expect(api.attention('another text', 'token', 0)).rejects.toThrow(/another text needs the model/);
    await expect(api.attention('a b c', 'word', 0)).rejects.toThrow(/word level/);
    await expect(api.attention('a b c', 'token', 0, 'float32', 'rollout')).rejects.toThrow(/rollout maps/);
    await expect(api.attention('a b c', 'token', 2)).rejects.toThrow(/layer 2 is outside 0 .. 1/);
    await expect(api.run('a b c', 'token', 'hide')).rejects.toThrow(/hiding special tokens/);
  });

  it('describes the model from the run and the attention, with the roles the heads name', () => {
    const m = embeddedModel(payload());
    expect([m.name, m.n_layer, m.n_head, m.causal]).toEqual(['tiny', 2, 2, true]);
    expect(m.kv_head_of).toEqual([0, 1]);
    expect(m.roles.map((r) => r.id)).toEqual(['previous_token']);
    expect(m.statistics_catalogue).toEqual([]);
  });

  it('reads the catalogue of statistics from the payload, with its constants', () => {
    const m = embeddedModel(payload({ statistics_catalogue: STATISTICS_CATALOGUE }));
    expect(m.statistics_catalogue).toBe(STATISTICS_CATALOGUE);
    expect([m.statistics.sparsity_fraction, m.statistics.cover_mass, m.statistics.local_window]).toEqual([0.1, 0.9, 3]);
  });

  it('checks that the pieces fit together', () => {
    expect(() => checkPayload(payload({ schema: 'other' }))).toThrow(/schema "other"/);
    const p = payload();
    expect(() => checkPayload({ ...p, attention: { ...p.attention, shape: [2, 2, 3, 4] } })).toThrow(
      /expected \[n_layer, n_head, T, T\]/,
    );
    expect(() => checkPayload({ ...p, run: { ...p.run, n_tokens: 4 } })).toThrow(/3 positions, the run 4 tokens/);
    expect(() => checkPayload({ ...p, run: { ...p.run, heads: p.run.heads.slice(1) } })).toThrow(
      /3 heads, the attention 2 × 2/,
    );
  });
});
