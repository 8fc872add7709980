import { describe, expect, it } from 'vitest';
import type { HeadImportance, ImportanceResult } from '../../lib/api';
import {
  importanceMaxTokens,
  importanceRefusal,
  importanceTooLong,
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

describe('importance refusals in words', () => {
  it('says how long a text may be for the model, and what to do', () => {
    expect(importanceMaxTokens(270)).toBe(60); // SmolLM2-135M: 16,384 / 270
    expect(importanceMaxTokens(72)).toBe(227); // all-MiniLM-L6-v2, Gemma 3 270M
    expect(importanceTooLong(60, 270)).toBeNull();
    const why = importanceTooLong(61, 270)!;
    expect(why).toContain('up to 60 tokens; this text has 61');
    expect(why).toContain('Shorten it');
    expect(why).not.toMatch(/limits::|kMax/);
  });
  it('translates the server’s text_too_long refusal, which names an internal constant', () => {
    const server =
      "/api/importance: the text is 80 tokens; at most 60 are allowed (importance reruns the text once for each of the model's 270 heads; limits::kMaxImportanceTokenPasses is 16384 tokens x heads): send a shorter text";
    const said = importanceRefusal('text_too_long', server, 270);
    expect(said).toContain('this text has 80');
    expect(said).not.toMatch(/limits::|kMax|\/api\//);
    expect(importanceRefusal('busy', 'the server is busy (limits::kMaxQueue)', 270)).toBe(
      'Importance could not be measured: the server is busy',
    );
  });
});
