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
  const bytes = new Uint8Array([
    parseInt(hex.slice(1, 3), 16),
    parseInt(hex.slice(3, 5), 16),
    parseInt(hex.slice(5, 7), 16),
    255,
  ]);
  return new Uint32Array(bytes.buffer)[0];
}

/** Whether cell (q, k) of a causal matrix is masked. Units (words, kept tokens, pooled blocks)
 *  are in text order, so a unit after the query's unit holds only future tokens. */
export function isMasked(causal: boolean, q: number, k: number): boolean {
  return causal && k > q;
}

/** Whether every pair of query tokens qa..qb and key tokens ka..kb is hidden from the model: the
 *  keys all come after the queries (causal), or all lie `window` or more tokens before them (a
 *  sliding-window layer: query q sees keys q − window + 1 .. q; window 0 = no window). */
export function spanMasked(qa: number, qb: number, ka: number, kb: number, window = 0): boolean {
  return ka > qb || (window > 0 && qa - kb >= window);
}

/** The masked cells of a matrix over units in text order (tokens, words, pooled blocks). block()
 *  takes half-open unit ranges and is true when every cell in them is masked. */
export interface UnitMask {
  cell(q: number, k: number): boolean;
  block(q0: number, q1: number, k0: number, k1: number): boolean;
  /** Why a masked cell is masked, for tooltips. */
  reason(q: number, k: number): string;
}

export const FUTURE_LABEL = 'masked (future token)';

/** The mask of a causal model's layer with sliding window `window` (0: none) over units that
 *  cover token spans span(u) = [first, last] (default: each unit is one token); undefined for a
 *  model that sees every key. */
export function unitMask(
  causal: boolean,
  window = 0,
  span: (u: number) => readonly [number, number] = (u) => [u, u],
): UnitMask | undefined {
  if (!causal) return undefined;
  const block = (q0: number, q1: number, k0: number, k1: number) =>
    spanMasked(span(q0)[0], span(q1 - 1)[1], span(k0)[0], span(k1 - 1)[1], window);
  return {
    block,
    cell: (q, k) => block(q, q + 1, k, k + 1),
    reason: (q, k) =>
      span(k)[0] > span(q)[1]
        ? FUTURE_LABEL
        : `masked (more than ${window} tokens back: outside this layer's sliding window)`,
  };
}

/** The mask of a matrix after maxPool(m, size): pooled cell i covers rows floor(i·n/size) .. */
export function pooledUnitMask(mask: UnitMask, n: number, size: number): UnitMask {
  if (n <= size) return mask;
  const lo = (i: number) => Math.floor((i * n) / size);
  const hi = (i: number) => Math.max(lo(i) + 1, Math.floor(((i + 1) * n) / size));
  const block = (q0: number, q1: number, k0: number, k1: number) => mask.block(lo(q0), hi(q1 - 1), lo(k0), hi(k1 - 1));
  return { block, cell: (q, k) => block(q, q + 1, k, k + 1), reason: (q, k) => mask.reason(lo(q), lo(k)) };
}

/**
 * Weights in [0, 1] under a colour scale → RGBA pixels (n × n). One table look-up and one
 * 32-bit store per cell, so that 12 heads × 512² cells take a few milliseconds. With `causal`,
 * the cells above the diagonal are drawn hatched grey instead of their (zero) weight.
 */
export function matrixPixels(m: Matrix, scale: ScaleName, causal: boolean | UnitMask = false): Pixels {
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
    const dark = packedGrey(MASKED_COLOURS[0]),
      light = packedGrey(MASKED_COLOURS[1]);
    const mask = causal === true ? undefined : causal;
    for (let q = 0; q < m.n; q++) {
      for (let k = 0; k < m.n; k++) {
        if (mask ? mask.cell(q, k) : k > q) out[q * m.n + k] = ((q + k) >> 1) & 1 ? dark : light;
      }
    }
  }
  return { width: m.n, height: m.n, data };
}

/**
 * A rows × cols block of weights → RGBA pixels (a region of a long text's map). `masked(r, c)`
 * marks the cells a causal model hides, hatched as in matrixPixels.
 */
export function rectPixels(
  values: Float32Array,
  rows: number,
  cols: number,
  scale: ScaleName,
  masked?: (r: number, c: number) => boolean,
): Pixels {
  const data = new Uint8ClampedArray(rows * cols * 4);
  const out = new Uint32Array(data.buffer);
  const table = packedTable(scale);
  for (let i = 0; i < rows * cols; i++) {
    const v = values[i];
    out[i] = table[v > 0 ? (v < 1 ? (v * WEIGHT_STEPS + 0.5) | 0 : WEIGHT_STEPS) : 0];
  }
  if (masked) {
    const dark = packedGrey(MASKED_COLOURS[0]),
      light = packedGrey(MASKED_COLOURS[1]);
    for (let r = 0; r < rows; r++)
      for (let c = 0; c < cols; c++) if (masked(r, c)) out[r * cols + c] = ((r + c) >> 1) & 1 ? dark : light;
  }
  return { width: cols, height: rows, data };
}

/**
 * Pixels for a heatmap drawn `cssSize` pixels wide: a matrix with more rows than screen pixels is
 * max-pooled first, so that one-cell lines (a previous-token diagonal at 500 tokens) stay visible
 * instead of being skipped by the scaling.
 */
export function displayPixels(
  m: Matrix,
  scale: ScaleName,
  cssSize: number,
  causal: boolean | UnitMask = false,
): Pixels {
  const screen = Math.ceil(cssSize * (typeof window === 'undefined' ? 1 : Math.min(3, window.devicePixelRatio || 1)));
  if (m.n <= screen) return matrixPixels(m, scale, causal);
  return matrixPixels(
    maxPool(m, screen),
    scale,
    typeof causal === 'boolean' ? causal : pooledUnitMask(causal, m.n, screen),
  );
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
