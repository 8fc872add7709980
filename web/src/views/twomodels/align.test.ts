import { describe, expect, it } from 'vitest';
import { censusRows, depthRows, layerAtDepth, layerDepth, roleCensus, tokenCovering, type Span } from './align';

describe('layers by relative depth', () => {
  it('puts the middle of a 6-layer and of a 30-layer stack at the same depth', () => {
    expect(layerDepth(0, 6)).toBeCloseTo(1 / 12);
    expect(layerDepth(5, 6)).toBeCloseTo(11 / 12);
    // Layer 3 of 6 (index 2..3 straddle the middle): rows of the same grid height meet at 0.5.
    expect(layerDepth(2, 6)).toBeLessThan(0.5);
    expect(layerDepth(3, 6)).toBeGreaterThan(0.5);
    expect(Math.abs(layerDepth(14, 30) - layerDepth(2, 6))).toBeLessThan(0.1);
    expect(layerAtDepth(0.5, 6)).toBe(3);
    expect(layerAtDepth(0.5, 30)).toBe(15);
    expect(layerAtDepth(1, 18)).toBe(17);
    expect(layerAtDepth(0, 18)).toBe(0);
  });

  it('gives two grids of one height rows that end together', () => {
    const a = depthRows(6, 360),
      b = depthRows(30, 360);
    expect(a).toHaveLength(6);
    expect(b).toHaveLength(30);
    expect(a[5].top + a[5].height).toBeCloseTo(360);
    expect(b[29].top + b[29].height).toBeCloseTo(360);
    // The centre of every row is its layer's depth times the height.
    for (const [rows, n] of [
      [a, 6],
      [b, 30],
    ] as const)
      rows.forEach((r, l) => expect(r.top + r.height / 2).toBeCloseTo(layerDepth(l, n) * 360));
  });
});

describe('the role census', () => {
  const head = (id: string) => ({ roles: { primary: { id } } });

  it('counts primary roles in the catalogue order, with shares, keeping roles no head has', () => {
    const c = roleCensus([head('sink'), head('broad'), head('sink'), head('induction')], ['broad', 'sink', 'self']);
    expect(c).toEqual([
      { id: 'broad', count: 1, share: 0.25 },
      { id: 'sink', count: 2, share: 0.5 },
      { id: 'self', count: 0, share: 0 },
      { id: 'induction', count: 1, share: 0.25 },
    ]);
    expect(c.reduce((s, e) => s + e.count, 0)).toBe(4);
  });

  it('lists the roles of both models once, leaving out those neither has', () => {
    const a = roleCensus([head('sink'), head('broad')], ['broad', 'sink', 'self', 'dormant']);
    const b = roleCensus([head('dormant'), head('broad'), head('copy')], ['broad', 'sink', 'self', 'dormant']);
    expect(censusRows(a, b)).toEqual(['broad', 'sink', 'dormant', 'copy']);
  });

  it('has no shares for a run without heads', () => {
    expect(roleCensus([], ['a'])).toEqual([{ id: 'a', count: 0, share: 0 }]);
  });
});

describe('a token of one tokenizer on another', () => {
  // "The trophy did not fit." as MiniLM (WordPiece, [CLS] … [SEP]) and SmolLM2 (byte-level BPE,
  // the space in front of a word belongs to it) read it.
  const t = (begin: number, end: number, special = false): Span => ({ begin, end, special });
  const minilm = [t(0, 0, true), t(0, 3), t(4, 10), t(11, 14), t(15, 18), t(19, 22), t(22, 23), t(23, 23, true)];
  const smollm = [t(0, 3), t(3, 10), t(10, 14), t(14, 18), t(18, 22), t(22, 23)];
  const gemma = [t(0, 0, true), t(0, 3), t(3, 10), t(10, 14), t(14, 18), t(18, 22), t(22, 23)];

  it('picks the token whose span covers the characters', () => {
    expect(tokenCovering(smollm, minilm[2])).toBe(1); // "trophy" → " trophy"
    expect(tokenCovering(minilm, smollm[1])).toBe(2); // " trophy" → "trophy"
    expect(tokenCovering(smollm, minilm[6])).toBe(5); // "."
    expect(tokenCovering(gemma, minilm[1])).toBe(1);
  });

  it('picks the token that overlaps most when a word is split differently', () => {
    // "suitcase" as one token here, "suit" + "case" there.
    const one = [t(0, 8)];
    const two = [t(0, 4), t(4, 8)];
    expect(tokenCovering(two, one[0])).toBe(0);
    expect(tokenCovering(one, two[1])).toBe(0);
    expect(tokenCovering([t(0, 2), t(2, 8)], one[0])).toBe(1);
  });

  it('maps a special token to a special token at the same place, else to the nearest word', () => {
    expect(tokenCovering(gemma, minilm[0])).toBe(0); // [CLS] → <bos>
    expect(tokenCovering(smollm, minilm[0])).toBe(0); // [CLS] → "The" (SmolLM2 adds no special token)
    expect(tokenCovering(smollm, minilm[7])).toBe(5); // [SEP] at the end → the last token
    expect(tokenCovering(minilm, gemma[0])).toBe(0); // <bos> → [CLS]
  });

  it('finds nothing past the end of a text the other model read only in part', () => {
    expect(tokenCovering(smollm.slice(0, 2), minilm[4])).toBe(-1);
  });
});
