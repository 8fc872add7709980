import { describe, expect, it } from 'vitest';
import { difference, headMatrix, keepAndRenormalise, maxPool, rowSums } from './matrix';

describe('keepAndRenormalise', () => {
  // Rows: [CLS] looks at itself; "a" splits 0.5 on [CLS], 0.3 on "a", 0.2 on [SEP]; …
  const m = {
    n: 4,
    data: new Float32Array([
      1.0,
      0.0,
      0.0,
      0.0, //
      0.5,
      0.3,
      0.0,
      0.2, //
      0.2,
      0.2,
      0.4,
      0.2, //
      0.0,
      0.0,
      0.0,
      1.0,
    ]),
  };
  const keep = [false, true, true, false];

  it('drops hidden positions and rescales every kept row to sum to 1', () => {
    const { matrix, index } = keepAndRenormalise(m, keep);
    expect(index).toEqual([1, 2]);
    expect(matrix.n).toBe(2);
    // Row "a": kept mass 0.3 + 0.0 → [1, 0]; row "b": 0.2 + 0.4 → [1/3, 2/3].
    expect(Array.from(matrix.data).map((v) => +v.toFixed(6))).toEqual([1, 0, 0.333333, 0.666667]);
    for (const s of rowSums(matrix)) expect(s).toBeCloseTo(1, 6);
  });

  it('leaves a row with no kept mass at zero instead of dividing by zero', () => {
    const { matrix } = keepAndRenormalise({ n: 2, data: new Float32Array([0, 1, 0, 1]) }, [true, false]);
    expect(Array.from(matrix.data)).toEqual([0]);
  });

  it('rejects a mask of the wrong length', () => {
    expect(() => keepAndRenormalise(m, [true])).toThrow(/keep has 1 entries/);
  });
});

describe('matrix helpers', () => {
  it('slices head (layer, head) out of [layers, heads, n, n]', () => {
    const data = new Float32Array(2 * 3 * 2 * 2).map((_, i) => i);
    const hm = headMatrix({ shape: [2, 3, 2, 2], data }, 1, 2);
    // Block index (1 * 3 + 2) = 5 → values 20..23.
    expect(Array.from(hm.data)).toEqual([20, 21, 22, 23]);
    expect(() => headMatrix({ shape: [2, 3, 2, 2], data }, 2, 0)).toThrow();
  });

  it('subtracts element by element', () => {
    const d = difference({ n: 1, data: new Float32Array([0.75]) }, { n: 1, data: new Float32Array([0.25]) });
    expect(Array.from(d.data)).toEqual([0.5]);
  });

  it('max-pools so that a one-cell diagonal survives', () => {
    const n = 8;
    const data = new Float32Array(n * n);
    for (let i = 0; i < n; i++) data[i * n + i] = 1;
    const p = maxPool({ n, data }, 4);
    expect(p.n).toBe(4);
    for (let i = 0; i < 4; i++) for (let j = 0; j < 4; j++) expect(p.data[i * 4 + j]).toBe(i === j ? 1 : 0);
  });
});
