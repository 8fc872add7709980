// Square attention matrices and the view transforms the explorer applies to them.
// Axes: row q = query, column k = key; every row is a distribution over the keys.

import type { Tensor } from './wire';

/** A square [n, n] row-major matrix: data[q * n + k]. */
export interface Matrix {
  n: number;
  data: Float32Array;
}

/** Head `head` of layer slot `layer` from an attention tensor [n_layer, n_head, U, U] (a view). */
export function headMatrix(t: Tensor, layer: number, head: number): Matrix {
  if (t.shape.length !== 4 || t.shape[2] !== t.shape[3])
    throw new Error(`expected [layers, heads, U, U], got [${t.shape.join(', ')}]`);
  const [nl, nh, n] = t.shape;
  if (layer < 0 || layer >= nl || head < 0 || head >= nh)
    throw new Error(`no head ${layer}.${head} in [${t.shape.join(', ')}]`);
  const block = n * n;
  const start = (layer * nh + head) * block;
  return { n, data: t.data.subarray(start, start + block) };
}

/**
 * Keeps the positions where keep[i] is true and renormalises every kept row to sum to 1, so
 * that hiding [CLS]/[SEP] shows how the rest of the attention is shared out. A row whose kept
 * mass is zero stays zero. Returns the new matrix and, for each kept position, its old index.
 */
export function keepAndRenormalise(m: Matrix, keep: readonly boolean[]): { matrix: Matrix; index: number[] } {
  if (keep.length !== m.n) throw new Error(`keep has ${keep.length} entries for a ${m.n}×${m.n} matrix`);
  const index: number[] = [];
  keep.forEach((k, i) => {
    if (k) index.push(i);
  });
  const n = index.length;
  const data = new Float32Array(n * n);
  for (let qi = 0; qi < n; qi++) {
    const src = index[qi] * m.n;
    let sum = 0;
    for (let ki = 0; ki < n; ki++) sum += m.data[src + index[ki]];
    const scale = sum > 0 ? 1 / sum : 0;
    for (let ki = 0; ki < n; ki++) data[qi * n + ki] = m.data[src + index[ki]] * scale;
  }
  return { matrix: { n, data }, index };
}

/** a − b, element by element (same size). */
export function difference(a: Matrix, b: Matrix): Matrix {
  if (a.n !== b.n) throw new Error(`cannot subtract a ${b.n}×${b.n} matrix from a ${a.n}×${a.n} one`);
  const data = new Float32Array(a.data.length);
  for (let i = 0; i < data.length; i++) data[i] = a.data[i] - b.data[i];
  return { n: a.n, data };
}

/**
 * Shrinks a matrix to at most `size` × `size` cells by taking the maximum of each block, so that a
 * one-cell-wide diagonal stays visible in a thumbnail (a mean would fade it).
 */
export function maxPool(m: Matrix, size: number): Matrix {
  if (m.n <= size) return m;
  const out = new Float32Array(size * size);
  for (let i = 0; i < size; i++) {
    const q0 = Math.floor((i * m.n) / size),
      q1 = Math.max(q0 + 1, Math.floor(((i + 1) * m.n) / size));
    for (let j = 0; j < size; j++) {
      const k0 = Math.floor((j * m.n) / size),
        k1 = Math.max(k0 + 1, Math.floor(((j + 1) * m.n) / size));
      let best = -Infinity;
      for (let q = q0; q < q1; q++) for (let k = k0; k < k1; k++) best = Math.max(best, m.data[q * m.n + k]);
      out[i * size + j] = best;
    }
  }
  return { n: size, data: out };
}

/** Row sums (1 for a distribution; used by tests and by the hover read-out). */
export function rowSums(m: Matrix): Float32Array {
  const s = new Float32Array(m.n);
  for (let q = 0; q < m.n; q++) {
    let acc = 0;
    for (let k = 0; k < m.n; k++) acc += m.data[q * m.n + k];
    s[q] = acc;
  }
  return s;
}

export function maxAbs(values: ArrayLike<number>): number {
  let m = 0;
  for (let i = 0; i < values.length; i++) m = Math.max(m, Math.abs(values[i]));
  return m;
}
