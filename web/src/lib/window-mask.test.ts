import { describe, expect, it } from 'vitest';
import { matrixPixels, MASKED_COLOURS, pooledUnitMask, spanMasked, unitMask } from './heatmap';
import { layerWindow, shownMask, shownMatrix } from './display';
import type { Units } from './units';

// transformers' sliding-window mask (Mistral, Gemma 2/3 local layers): query q may attend to key k
// when k <= q and q - k < window.
const hidden = (q: number, k: number, window: number) => k > q || (window > 0 && q - k >= window);

describe('sliding-window masks', () => {
  it('token cells follow the window rule', () => {
    const m = unitMask(true, 3)!;
    for (let q = 0; q < 8; q++) for (let k = 0; k < 8; k++) expect(m.cell(q, k)).toBe(hidden(q, k, 3));
    expect(m.reason(5, 1)).toContain('3 tokens back');
    expect(m.reason(1, 5)).toBe('masked (future token)');
  });

  it('a model without a window keeps the causal mask; an encoder has none', () => {
    const m = unitMask(true, 0)!;
    expect(m.cell(100, 0)).toBe(false);
    expect(m.cell(0, 1)).toBe(true);
    expect(unitMask(false, 4)).toBeUndefined();
  });

  it('a unit block is masked exactly when every token pair in it is', () => {
    const spans: [number, number][] = [
      [0, 0],
      [1, 2],
      [3, 3],
      [4, 6],
      [7, 7],
      [8, 9],
    ];
    for (const w of [1, 2, 3, 5]) {
      const m = unitMask(true, w, (u) => spans[u])!;
      for (let q = 0; q < spans.length; q++) {
        for (let k = 0; k < spans.length; k++) {
          let all = true;
          for (let a = spans[q][0]; a <= spans[q][1]; a++)
            for (let b = spans[k][0]; b <= spans[k][1]; b++) all &&= hidden(a, b, w);
          expect(m.cell(q, k), `w ${w}, units ${q} → ${k}`).toBe(all);
        }
      }
    }
  });

  it('pooled blocks are masked only when all their cells are', () => {
    const n = 23,
      size = 7,
      w = 4;
    const pooled = pooledUnitMask(unitMask(true, w)!, n, size);
    for (let i = 0; i < size; i++) {
      for (let j = 0; j < size; j++) {
        const q0 = Math.floor((i * n) / size),
          q1 = Math.max(q0 + 1, Math.floor(((i + 1) * n) / size));
        const k0 = Math.floor((j * n) / size),
          k1 = Math.max(k0 + 1, Math.floor(((j + 1) * n) / size));
        let all = true;
        for (let q = q0; q < q1; q++) for (let k = k0; k < k1; k++) all &&= hidden(q, k, w);
        expect(pooled.cell(i, j)).toBe(all);
      }
    }
    expect(spanMasked(10, 12, 2, 5, 5)).toBe(true); // 10 − 5 = 5 ≥ 5: every pair is out
    expect(spanMasked(10, 12, 2, 6, 5)).toBe(false); // (10, 6) is inside
  });

  it('the shown matrix hatches the cells outside the window, in word units after hiding specials', () => {
    const units: Units = {
      level: 'word',
      labels: ['<bos>', 'a', 'bc', 'd', 'ef'],
      special: [true, false, false, false, false],
      tokens: [[0], [1], [2, 3], [4], [5, 6]],
    };
    const n = 5;
    const data = new Float32Array(n * n).fill(0.2);
    const shown = shownMatrix({ n, data }, units, true); // drops <bos>: units 1..4
    const mask = shownMask(shown, units, true, 2)!;
    // Unit 4 (tokens 5–6) against unit 1 (token 1): 5 − 1 ≥ 2 → hidden; against unit 3 (token 4): not.
    expect(mask.cell(3, 0)).toBe(true);
    expect(mask.cell(3, 2)).toBe(false);
    const px = matrixPixels(shown.matrix, 'linear', mask);
    const grey = (q: number, k: number) => {
      const i = (q * shown.matrix.n + k) * 4;
      return '#' + [0, 1, 2].map((c) => px.data[i + c].toString(16).padStart(2, '0')).join('');
    };
    expect(MASKED_COLOURS).toContain(grey(3, 0));
    expect(MASKED_COLOURS).not.toContain(grey(3, 2));
    expect(layerWindow({ window: [0, 512] }, 1)).toBe(512);
    expect(layerWindow({}, 1)).toBe(0);
    expect(layerWindow({ window: [512] }, 0, 512)).toBe(0); // the window covers the whole text: it hides nothing
    expect(layerWindow({ window: [512] }, 0, 600)).toBe(512);
  });
});
