// Attention matrices as pixels: one pixel per cell through a colour lookup table, then scaled up
// on a canvas without smoothing. Building the pixels is a single pass over the matrix, so a
// layer of 12 heads at 512 tokens (3 M cells) redraws in a few milliseconds.

import { DIVERGING_LUT, SEQUENTIAL_LUT, scaleValue, type ScaleName } from './colour';
import { maxPool, type Matrix } from './matrix';
import type { Pixels } from './scene';

/** Weights are quantised to this many steps before the colour look-up (1.5e-5 apart: fine
 *  enough for the log scale's lowest decade, 0.001–0.01). */
const WEIGHT_STEPS = 65535;

/** For each quantised weight, its RGBA colour packed in one 32-bit word (native byte order). */
const packedTables = new Map<ScaleName, Uint32Array>();

function packedTable(scale: ScaleName): Uint32Array {
  let table = packedTables.get(scale);
  if (table) return table;
  table = new Uint32Array(WEIGHT_STEPS + 1);
  const bytes = new Uint8Array(table.buffer);
  const last = SEQUENTIAL_LUT.length / 4 - 1;
  for (let i = 0; i <= WEIGHT_STEPS; i++) {
    const j = Math.round(scaleValue(i / WEIGHT_STEPS, scale) * last) * 4;
    bytes.set(SEQUENTIAL_LUT.subarray(j, j + 4), i * 4);
  }
  packedTables.set(scale, table);
  return table;
}

/** The two greys of the hatching that marks masked cells (a key after its query in a causal
 *  model): grey is outside the weight palette, whose lightest colour (weight 0) is near-white, so
 *  "not allowed to look" never reads as "looked with weight 0". */
export const MASKED_COLOURS: readonly [string, string] = ['#8d949c', '#c3c8ce'];

function packedGrey(hex: string): number {
  const bytes = new Uint8Array([parseInt(hex.slice(1, 3), 16), parseInt(hex.slice(3, 5), 16), parseInt(hex.slice(5, 7), 16), 255]);
  return new Uint32Array(bytes.buffer)[0];
}

/** Whether cell (q, k) of a causal matrix is masked. Units (words, kept tokens, pooled blocks)
 *  are in text order, so a unit after the query's unit holds only future tokens. */
export function isMasked(causal: boolean, q: number, k: number): boolean {
  return causal && k > q;
}

/**
 * Weights in [0, 1] under a colour scale → RGBA pixels (n × n). One table look-up and one
 * 32-bit store per cell, so that 12 heads × 512² cells take a few milliseconds. With `causal`,
 * the cells above the diagonal are drawn hatched grey instead of their (zero) weight.
 */
export function matrixPixels(m: Matrix, scale: ScaleName, causal = false): Pixels {
  const size = m.n * m.n;
  const data = new Uint8ClampedArray(size * 4);
  const out = new Uint32Array(data.buffer);
  const table = packedTable(scale);
  const src = m.data;
  for (let i = 0; i < size; i++) {
    const v = src[i];
    // v !== v is NaN; weights outside [0, 1] are clamped like scaleValue does.
    out[i] = table[v > 0 ? (v < 1 ? (v * WEIGHT_STEPS + 0.5) | 0 : WEIGHT_STEPS) : 0];
  }
  if (causal) {
    // Diagonal stripes: the two greys alternate along anti-diagonals, in bands of two cells.
    const dark = packedGrey(MASKED_COLOURS[0]), light = packedGrey(MASKED_COLOURS[1]);
    for (let q = 0; q < m.n; q++) for (let k = q + 1; k < m.n; k++) out[q * m.n + k] = ((q + k) >> 1) & 1 ? dark : light;
  }
  return { width: m.n, height: m.n, data };
}

/**
 * A rows × cols block of weights → RGBA pixels (a region of a long text's map). `masked(r, c)`
 * marks the cells a causal model hides, hatched as in matrixPixels.
 */
export function rectPixels(values: Float32Array, rows: number, cols: number, scale: ScaleName, masked?: (r: number, c: number) => boolean): Pixels {
  const data = new Uint8ClampedArray(rows * cols * 4);
  const out = new Uint32Array(data.buffer);
  const table = packedTable(scale);
  for (let i = 0; i < rows * cols; i++) {
    const v = values[i];
    out[i] = table[v > 0 ? (v < 1 ? (v * WEIGHT_STEPS + 0.5) | 0 : WEIGHT_STEPS) : 0];
  }
  if (masked) {
    const dark = packedGrey(MASKED_COLOURS[0]), light = packedGrey(MASKED_COLOURS[1]);
    for (let r = 0; r < rows; r++) for (let c = 0; c < cols; c++) if (masked(r, c)) out[r * cols + c] = ((r + c) >> 1) & 1 ? dark : light;
  }
  return { width: cols, height: rows, data };
}

/**
 * Pixels for a heatmap drawn `cssSize` pixels wide: a matrix with more rows than screen pixels is
 * max-pooled first, so that one-cell lines (a previous-token diagonal at 500 tokens) stay visible
 * instead of being skipped by the scaling.
 */
export function displayPixels(m: Matrix, scale: ScaleName, cssSize: number, causal = false): Pixels {
  const screen = Math.ceil(cssSize * (typeof window === 'undefined' ? 1 : Math.min(3, window.devicePixelRatio || 1)));
  return matrixPixels(m.n > screen ? maxPool(m, screen) : m, scale, causal);
}

/** Signed values → diverging colours, ±limit at the ends (for differences of two heads). */
export function signedPixels(values: ArrayLike<number>, width: number, height: number, limit: number): Pixels {
  const data = new Uint8ClampedArray(width * height * 4);
  const last = DIVERGING_LUT.length / 4 - 1;
  for (let i = 0; i < width * height; i++) {
    const t = limit > 0 ? 0.5 + 0.5 * Math.max(-1, Math.min(1, values[i] / limit)) : 0.5;
    const j = Math.round(t * last) * 4;
    data[i * 4] = DIVERGING_LUT[j];
    data[i * 4 + 1] = DIVERGING_LUT[j + 1];
    data[i * 4 + 2] = DIVERGING_LUT[j + 2];
    data[i * 4 + 3] = 255;
  }
  return { width, height, data };
}

/** A canvas holding the pixels at their own size (source for drawImage). */
export function pixelsCanvas(p: Pixels): HTMLCanvasElement {
  const c = document.createElement('canvas');
  c.width = p.width;
  c.height = p.height;
  const ctx = c.getContext('2d')!;
  const img = ctx.createImageData(p.width, p.height);
  img.data.set(p.data);
  ctx.putImageData(img, 0, 0);
  return c;
}

/** The cell under a pointer position inside a heatmap drawn at `size` CSS pixels. */
export function cellAt(offsetX: number, offsetY: number, size: number, n: number): { q: number; k: number } | null {
  if (offsetX < 0 || offsetY < 0 || offsetX >= size || offsetY >= size || n === 0) return null;
  return { q: Math.min(n - 1, Math.floor((offsetY / size) * n)), k: Math.min(n - 1, Math.floor((offsetX / size) * n)) };
}
