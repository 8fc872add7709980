import { describe, expect, it } from 'vitest';
import type { RunResult } from './api';
import { shownMatrix } from './display';
import { keepMask, unitOfToken, unitsOf } from './units';

const run = {
  tokens: [
    { id: 101, text: '[CLS]', begin: 0, end: 0, special: true, word: -1 },
    { id: 1, text: 'play', begin: 0, end: 4, special: false, word: 0 },
    { id: 2, text: '##ing', begin: 4, end: 7, special: false, word: 0 },
    { id: 3, text: 'now', begin: 8, end: 11, special: false, word: 1 },
    { id: 102, text: '[SEP]', begin: 0, end: 0, special: true, word: -1 },
  ],
  words: [
    { text: '[CLS]', tokens: [0], special: true },
    { text: 'playing', tokens: [1, 2], special: false },
    { text: 'now', tokens: [3], special: false },
    { text: '[SEP]', tokens: [4], special: true },
  ],
} as unknown as RunResult;

describe('units', () => {
  it('lists tokens or words with their special flags', () => {
    const t = unitsOf(run, 'token');
    expect(t.labels).toEqual(['[CLS]', 'play', '##ing', 'now', '[SEP]']);
    const w = unitsOf(run, 'word');
    expect(w.labels).toEqual(['[CLS]', 'playing', 'now', '[SEP]']);
    expect(keepMask(w, true)).toEqual([false, true, true, false]);
    expect(keepMask(w, false)).toEqual([true, true, true, true]);
    expect(unitOfToken(w, 2)).toBe(1);
    expect(unitOfToken(w, 9)).toBe(-1);
  });

  it('hides special units and renormalises what is shown', () => {
    const w = unitsOf(run, 'word');
    // Row "playing" puts 0.5 on [CLS], 0.25 on itself, 0.25 on "now".
    const m = { n: 4, data: new Float32Array([1, 0, 0, 0, 0.5, 0.25, 0.25, 0, 0.1, 0.1, 0.3, 0.5, 0, 0, 0, 1]) };
    const shown = shownMatrix(m, w, true);
    expect(shown.labels).toEqual(['playing', 'now']);
    expect(shown.index).toEqual([1, 2]);
    expect(Array.from(shown.matrix.data)).toEqual([0.5, 0.5, 0.25, 0.75]);
    const all = shownMatrix(m, w, false);
    expect(all.matrix).toBe(m);
  });
});
