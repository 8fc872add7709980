import { describe, expect, it } from 'vitest';
import type { CompositionResult } from '../../lib/api';
import { SEQUENTIAL_LUT } from '../../lib/colour';
import {
  againstBaseline,
  compositionCsv,
  compositionGrid,
  compositionPixels,
  describeCell,
  hasPath,
  headAt,
  NO_PATH_COLOUR,
  shade,
} from './composition-grid';

/** A reply for 3 layers × 2 heads whose score of sender (l1, h1) into receiver (l2, h2) is
 *  0.1·l1 + 0.01·h1 + 0.001·l2 + 0.0001·h2 + base (Q 1, K 2, V 3), 0 where l2 <= l1. */
function reply(): CompositionResult {
  const L = 3,
    H = 2;
  const scores = (base: number) =>
    Array.from({ length: L }, (_, l1) =>
      Array.from({ length: H }, (_, h1) =>
        Array.from({ length: L }, (_, l2) =>
          Array.from({ length: H }, (_, h2) => (l2 > l1 ? base + 0.1 * l1 + 0.01 * h1 + 0.001 * l2 + 0.0001 * h2 : 0)),
        ),
      ),
    );
  return {
    shape: [L, H, L, H],
    scores: { Q: scores(1), K: scores(2), V: scores(3) },
    baseline: { draws: 10, seed: 0, Q: { mean: 1, std: 0.01 }, K: { mean: 2, std: 0.02 }, V: { mean: 3, std: 0 } },
    top: { Q: [], K: [], V: [] },
  } as unknown as CompositionResult;
}

describe('the composition grid', () => {
  it('lays the nested scores out with senders as rows and receivers as columns, layer-major', () => {
    const g = compositionGrid(reply());
    expect([g.nLayer, g.nHead, g.n]).toEqual([3, 2, 6]);
    // Sender L1 H2 (index 0.1) into receiver L3 H1 (2.0): row 1, column 4.
    expect(g.values.K[1 * 6 + 4]).toBeCloseTo(2 + 0.01 + 0.002, 6);
    expect(g.values.Q[5 * 6 + 0]).toBe(0);
    expect(g.max.V).toBeCloseTo(3 + 0.1 + 0.01 + 0.002 + 0.0001, 6);
    expect(headAt(5, 2)).toEqual({ layer: 2, head: 1 });
    expect(hasPath(1, 2, 2)).toBe(true); // layer 0 → layer 1
    expect(hasPath(2, 3, 2)).toBe(false); // layer 1 → layer 1
    expect(hasPath(4, 1, 2)).toBe(false); // layer 2 → layer 0
  });

  it('refuses a reply whose lists do not fill its shape', () => {
    const r = reply();
    r.scores.Q[0][0].pop();
    expect(() => compositionGrid(r)).toThrow(/composition scores of Q/);
  });

  it('starts the colour scale at the random mean and greys out cells without a path', () => {
    expect(shade(0.5, 1, 2)).toBe(0);
    expect(shade(1.5, 1, 2)).toBe(0.5);
    expect(shade(3, 1, 2)).toBe(1);
    expect(shade(1, 1, 1)).toBe(0);
    const g = compositionGrid(reply());
    const p = compositionPixels(g, 'Q', 1);
    expect([p.width, p.height]).toEqual([6, 6]);
    const rgb = (i: number, j: number) => Array.from(p.data.subarray((i * 6 + j) * 4, (i * 6 + j) * 4 + 3));
    const grey = [1, 3, 5].map((k) => parseInt(NO_PATH_COLOUR.slice(k, k + 2), 16));
    expect(rgb(3, 2)).toEqual(grey);
    expect(rgb(0, 0)).toEqual(grey);
    // The highest Q score (row 3: sender 1.1, column 5: receiver 2.1) is the palette's darkest colour.
    const last = SEQUENTIAL_LUT.length - 4;
    expect(rgb(3, 5)).toEqual(Array.from(SEQUENTIAL_LUT.subarray(last, last + 3)));
    expect(p.data[3]).toBe(255);
  });

  it('reads a score against the baseline as a multiple of its mean and in standard deviations', () => {
    expect(againstBaseline(0.2, { mean: 0.04, std: 0.01 })).toEqual({ times: 5, sd: 16 });
    expect(againstBaseline(0.2, { mean: 0, std: 0 })).toEqual({ times: 0, sd: 0 });
  });

  it('describes a cell with the pair, its score against the baseline and the other kinds', () => {
    const g = compositionGrid(reply());
    const lines = describeCell(g, reply(), 'K', 1, 4, 3);
    expect(lines[0]).toBe('L1 H2 → L3 H1');
    expect(lines[1]).toBe('index 0.1 → 2.0');
    expect(lines[2]).toBe('K-composition 2.012: ×1.0 the random mean (+1 sd)');
    expect(lines[3]).toBe('random heads: 2.0000 ± 0.0200');
    expect(lines[4]).toBe('Q 1.012 · K 2.012 · V 3.012');
    expect(lines[5]).toMatch(/shares W_K and W_V with the 2 other query heads/);
    expect(describeCell(g, reply(), 'Q', 1, 4, 3)).toHaveLength(5);
    expect(describeCell(g, reply(), 'Q', 4, 1, 1)[2]).toMatch(/^no path/);
  });

  it('writes the CLI’s CSV: one row per pair whose receiver is later', () => {
    const all = compositionCsv(compositionGrid(reply()), 'm').trim().split('\n');
    expect(all[1]).toBe('# model: m');
    expect(all[3]).toMatch(/^# numbering: layers, heads and key\/value heads counted from 1/);
    const csv = all.slice(4);
    expect(csv[0]).toBe('sender_layer,sender_head,receiver_layer,receiver_head,q,k,v');
    // 2 · 2 heads × (layer pairs 0→1, 0→2, 1→2) = 12 rows.
    expect(csv).toHaveLength(13);
    expect(csv[1]).toBe('1,1,2,1,1.001,2.001,3.001'); // layer 0 head 0 → layer 1 head 0, counted from 1
  });
});
