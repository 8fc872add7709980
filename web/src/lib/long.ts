// Long texts: the region of a T × T attention map that the zoomable view shows, and how it moves.
// A streamed run (/api/run says streamed: true) keeps no full maps: the explorer draws the pooled
// overview (/api/overview) and, once the region is small enough, the exact weights of the region
// (/api/tile). Everything here is pure arithmetic on half-open token ranges, tested in long.test.ts.

/** Query rows q0 .. q1 − 1 × keys k0 .. k1 − 1 (token indices, ends excluded). */
export interface Region {
  q0: number;
  q1: number;
  k0: number;
  k1: number;
}

/** The overview's cells as /api/run describes them: cell c covers tokens starts[c] .. starts[c + 1] − 1. */
export interface OverviewInfo {
  cells: number;
  T: number;
  starts: number[];
  max_tile_cells: number;
}

export function fullRegion(T: number): Region {
  return { q0: 0, q1: T, k0: 0, k1: T };
}

/** Shifts a range of length `len` (≥ 1, at most T) so that it lies inside [0, T). */
function fitRange(lo: number, len: number, T: number): [number, number] {
  len = Math.max(1, Math.min(T, Math.round(len)));
  lo = Math.max(0, Math.min(T - len, Math.round(lo)));
  return [lo, lo + len];
}

/** The region moved and resized as little as needed to lie inside the text, at least one token a side. */
export function clampRegion(r: Region, T: number): Region {
  const [q0, q1] = fitRange(r.q0, r.q1 - r.q0, T);
  const [k0, k1] = fitRange(r.k0, r.k1 - r.k0, T);
  return { q0, q1, k0, k1 };
}

/**
 * Zooms by `factor` (> 1: in, < 1: out) around the point (fq, fk) given as fractions of the
 * region (0 = top / left edge, 1 = bottom / right): that point stays under the pointer.
 */
export function zoomRegion(r: Region, factor: number, T: number, fq = 0.5, fk = 0.5): Region {
  const zoom = (lo: number, hi: number, f: number): [number, number] => {
    const len = Math.max(1, Math.min(T, (hi - lo) / factor));
    const at = lo + f * (hi - lo);
    return fitRange(at - f * len, len, T);
  };
  const [q0, q1] = zoom(r.q0, r.q1, fq);
  const [k0, k1] = zoom(r.k0, r.k1, fk);
  return { q0, q1, k0, k1 };
}

/** Moves the region by dq rows and dk keys, stopping at the text's edges. */
export function panRegion(r: Region, dq: number, dk: number, T: number): Region {
  return clampRegion({ q0: r.q0 + dq, q1: r.q1 + dq, k0: r.k0 + dk, k1: r.k1 + dk }, T);
}

/** The region spanned by two points given as fractions of `r` (a dragged rectangle). */
export function regionBetween(r: Region, a: [number, number], b: [number, number], T: number): Region {
  const q = (f: number) => r.q0 + f * (r.q1 - r.q0);
  const k = (f: number) => r.k0 + f * (r.k1 - r.k0);
  const q0 = Math.floor(q(Math.min(a[0], b[0]))),
    q1 = Math.ceil(q(Math.max(a[0], b[0])));
  const k0 = Math.floor(k(Math.min(a[1], b[1]))),
    k1 = Math.ceil(k(Math.max(a[1], b[1])));
  return clampRegion({ q0, q1: Math.max(q1, q0 + 1), k0, k1: Math.max(k1, k0 + 1) }, T);
}

export function regionCells(r: Region): number {
  return (r.q1 - r.q0) * (r.k1 - r.k0);
}

export function isFull(r: Region, T: number): boolean {
  return r.q0 === 0 && r.k0 === 0 && r.q1 === T && r.k1 === T;
}

/** The overview cell holding token t (HeadOverview::cell_of). */
export function cellOf(info: OverviewInfo, t: number): number {
  return Math.floor((t * info.cells) / info.T);
}

/** Overview cells c0 .. c1 − 1 that cover tokens t0 .. t1 − 1. */
export function cellRange(info: OverviewInfo, t0: number, t1: number): [number, number] {
  return [cellOf(info, t0), cellOf(info, t1 - 1) + 1];
}

/**
 * A rows × cols block of values shrunk to at most maxRows × maxCols by the largest value of each
 * block, so that a one-token diagonal stays visible (as the overview's own max map does).
 */
export function poolBounds(i: number, n: number, pooled: number): [number, number] {
  const lo = Math.floor((i * n) / pooled);
  return [lo, Math.max(lo + 1, Math.floor(((i + 1) * n) / pooled))];
}

export function maxPoolRect(
  values: Float32Array,
  rows: number,
  cols: number,
  maxRows: number,
  maxCols: number,
): { rows: number; cols: number; data: Float32Array } {
  const R = Math.min(rows, maxRows),
    C = Math.min(cols, maxCols);
  if (R === rows && C === cols) return { rows, cols, data: values };
  const out = new Float32Array(R * C);
  for (let i = 0; i < R; i++) {
    const [r0, r1] = poolBounds(i, rows, R);
    for (let j = 0; j < C; j++) {
      const [c0, c1] = poolBounds(j, cols, C);
      let best = -Infinity;
      for (let r = r0; r < r1; r++) for (let c = c0; c < c1; c++) best = Math.max(best, values[r * cols + c]);
      out[i * C + j] = best;
    }
  }
  return { rows: R, cols: C, data: out };
}

/** Head `head`'s part of a layer's overview [n_head, 2, cells, cells]: 0 the summed weights of
 *  each block, 1 the largest weight of each block (a view, not a copy). */
export function overviewPart(overview: { data: Float32Array }, head: number, part: 0 | 1, cells: number): Float32Array {
  const start = (head * 2 + part) * cells * cells;
  return overview.data.subarray(start, start + cells * cells);
}

/**
 * The weight a query of each block gives each block of keys, averaged over the block's queries:
 * the summed weights of block (i, j) divided by the rows of block i. Every row of the result sums
 * to 1 like a row of weights, so two heads compare block by block as two attention maps would.
 */
export function blockMass(sum: Float32Array, info: OverviewInfo): Float32Array {
  const C = info.cells;
  const out = new Float32Array(C * C);
  for (let i = 0; i < C; i++) {
    const rows = Math.max(1, info.starts[i + 1] - info.starts[i]);
    for (let j = 0; j < C; j++) out[i * C + j] = sum[i * C + j] / rows;
  }
  return out;
}

/** Most tokens a side that Head lines draws for a long text (a line per pair: 64² at most). */
export const LINES_MAX = 64;

/**
 * The tokens Head lines draws for a streamed run: the head panel's region when it holds at most
 * `max` tokens a side (`follows`), else `max` tokens from `start` as both queries and keys.
 */
export function linesWindow(
  region: Region | undefined,
  T: number,
  start: number,
  max = LINES_MAX,
): Region & { follows: boolean } {
  if (region && region.q1 - region.q0 <= max && region.k1 - region.k0 <= max && region.q1 <= T && region.k1 <= T)
    return { ...region, follows: true };
  const [q0, q1] = fitRange(start, max, T);
  return { q0, q1, k0: q0, k1: q1, follows: false };
}
