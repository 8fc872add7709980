import { describe, expect, it } from 'vitest';
import { attentionKind, kvCountText, headRange, kvGroups } from './kv-groups';
import { isMasked, matrixPixels, MASKED_COLOURS } from './heatmap';

/** The map a Llama-style model uses (transformers' repeat_kv): query head h reads KV head
 *  floor(h / (n_head / n_kv_head)). Built here independently of the server. */
function llamaMap(nHead: number, nKv: number): number[] {
  return Array.from({ length: nHead }, (_, h) => Math.floor(h / (nHead / nKv)));
}

describe('kvGroups', () => {
  it('groups SmolLM2-135M: 9 query heads on 3 KV heads', () => {
    const groups = kvGroups({ n_head: 9, n_kv_head: 3, kv_head_of: llamaMap(9, 3) });
    expect(groups).not.toBeNull();
    expect(groups!.map((g) => g.heads)).toEqual([
      [0, 1, 2],
      [3, 4, 5],
      [6, 7, 8],
    ]);
    expect(groups!.map((g) => g.label)).toEqual([
      'KV head 1: heads 1–3',
      'KV head 2: heads 4–6',
      'KV head 3: heads 7–9',
    ]);
  });

  it('puts every head in one group under multi-query attention', () => {
    const groups = kvGroups({ n_head: 4, n_kv_head: 1, kv_head_of: [0, 0, 0, 0] });
    expect(groups).toEqual([{ kv: 0, heads: [0, 1, 2, 3], label: 'KV head 1: heads 1–4' }]);
  });

  it('returns null for plain multi-head attention (nothing shared)', () => {
    expect(kvGroups({ n_head: 12, n_kv_head: 12, kv_head_of: llamaMap(12, 12) })).toBeNull();
  });

  it('lists heads that are not consecutive', () => {
    const groups = kvGroups({ n_head: 4, n_kv_head: 2, kv_head_of: [0, 1, 0, 1] });
    expect(groups!.map((g) => g.label)).toEqual(['KV head 1: heads 1, 3', 'KV head 2: heads 2, 4']);
    expect(headRange([5])).toBe('head 6'); // index 5 is the sixth head
  });

  it('rejects maps that do not fit the head counts', () => {
    expect(() => kvGroups({ n_head: 4, n_kv_head: 2, kv_head_of: [0, 1, 2] })).toThrow(/3 entries for 4/);
    expect(() => kvGroups({ n_head: 4, n_kv_head: 2, kv_head_of: [0, 1, 2, 1] })).toThrow(/KV head 2/);
  });
});

describe('causal mask in heatmaps', () => {
  it('marks exactly the cells above the diagonal', () => {
    expect(isMasked(true, 1, 2)).toBe(true);
    expect(isMasked(true, 2, 2)).toBe(false);
    expect(isMasked(true, 2, 1)).toBe(false);
    expect(isMasked(false, 1, 2)).toBe(false);
  });

  it('draws masked cells grey, apart from a zero weight below the diagonal', () => {
    const n = 3;
    // Lower triangle of a causal attention matrix; row 1 gives weight 0 to key 0.
    const data = new Float32Array([1, 0, 0, 0, 1, 0, 0.5, 0.5, 0]);
    const plain = matrixPixels({ n, data }, 'linear');
    const causal = matrixPixels({ n, data }, 'linear', true);
    const rgb = (p: { data: Uint8ClampedArray }, q: number, k: number) =>
      Array.from(p.data.subarray((q * n + k) * 4, (q * n + k) * 4 + 3));
    const greys = MASKED_COLOURS.map((hex) => [1, 3, 5].map((i) => parseInt(hex.slice(i, i + 2), 16)));
    for (let q = 0; q < n; q++)
      for (let k = 0; k < n; k++) {
        if (k > q) expect(greys).toContainEqual(rgb(causal, q, k));
        else expect(rgb(causal, q, k)).toEqual(rgb(plain, q, k));
      }
    // The zero weight at (1, 0) keeps the palette's zero colour, which is not a masked grey.
    expect(greys).not.toContainEqual(rgb(causal, 1, 0));
    expect(rgb(causal, 1, 0)).toEqual(rgb(plain, 0, 1));
  });
});

describe('attentionKind', () => {
  it('names one KV head for all query heads multi-query, fewer grouped-query, as many multi-head', () => {
    expect(attentionKind({ n_head: 4, n_kv_head: 1 })).toBe('multi-query attention'); // Gemma 3 270M
    expect(attentionKind({ n_head: 9, n_kv_head: 3 })).toBe('grouped-query attention'); // SmolLM2-135M
    expect(attentionKind({ n_head: 12, n_kv_head: 12 })).toBe('multi-head attention'); // MiniLM
    expect(kvCountText(1, 4)).toBe('1 (MQA)');
    expect(kvCountText(8, 64)).toBe('8 (GQA)');
    expect(kvCountText(12, 12)).toBe('12 (one per head)');
  });
});
