import { describe, expect, it } from 'vitest';
import type { HeadImportance, ImportanceResult } from '../../lib/api';
import {
  barFraction,
  byImportance,
  effectOf,
  effectText,
  leastImportant,
  rankOf,
  rankText,
  topShare,
  unitLabel,
} from './importance';

/** Layer-major head objects of a 2 × 3 model from their effects and ranks (proxy: 1, 2, ...). */
function heads(ablation: number[], rank: number[]): HeadImportance[] {
  return ablation.map((a, i) => ({ layer: Math.floor(i / 3), head: i % 3, ablation: a, proxy: i + 1, rank: rank[i] }));
}

// 2 layers × 3 heads; effects chosen so that the ranks and shares can be worked out by hand.
const imp: ImportanceResult = {
  shape: [2, 3],
  tokens: 10,
  mode: 'zero',
  measure: 'embedding_distance',
  unit: '1 - cos',
  importance: heads([0.4, 0.1, 0.0, 0.3, -0.05, 0.2], [1, 4, 5, 2, 6, 3]),
  spearman: 0.1,
  seconds: 0.5,
  cached: false,
};

describe('importance helpers', () => {
  it('orders heads by rank', () => {
    expect(byImportance(imp)).toEqual([0, 3, 5, 1, 2, 4]);
  });
  it('reads a head by its layer-major index', () => {
    expect(rankOf(imp, 4)).toBe(6);
    expect(effectOf(imp, 3)).toBe(0.3);
    expect(imp.importance[4]).toMatchObject({ layer: 1, head: 1 });
  });
  it('gives the top-k share of the positive effects', () => {
    // positive sum 0.4 + 0.1 + 0.3 + 0.2 = 1.0; the top two 0.4 + 0.3
    expect(topShare(imp, 2)).toBeCloseTo(0.7, 12);
    expect(topShare({ ...imp, importance: heads([0, 0, 0, 0, -1, 0], [1, 2, 3, 4, 6, 5]) }, 2)).toBe(0);
  });
  it('lists the least important heads as [layer, head], least first', () => {
    expect(leastImportant(imp, 3)).toEqual([
      [1, 1],
      [0, 2],
      [0, 1],
    ]);
  });
  it('writes ranks, units and small numbers', () => {
    expect(rankText(imp, 3)).toBe('importance #2 of 6 (0.300 1 − cos)');
    expect(unitLabel('nats')).toBe('Δ loss, nats');
    expect(effectText(0.000123)).toBe('1.23e-4');
    expect(effectText(null)).toBe('–');
    expect(effectText(0)).toBe('0');
  });
  it('scales bars to the largest effect and clamps negatives to 0', () => {
    expect(barFraction(imp, 3)).toBeCloseTo(0.75, 12);
    expect(barFraction(imp, 4)).toBe(0);
  });
});
