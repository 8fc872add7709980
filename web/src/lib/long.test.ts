import { describe, expect, it } from 'vitest';
import { unitMask } from './heatmap';
import {
  blockMass,
  cellRange,
  clampRegion,
  fullRegion,
  linesWindow,
  maxPoolRect,
  overviewPart,
  panRegion,
  poolBounds,
  regionBetween,
  regionCells,
  zoomRegion,
  type OverviewInfo,
} from './long';

describe('regions of a long text', () => {
  const T = 8192;
  it('zooming in and out keeps the point under the pointer and stays inside the text', () => {
    const full = fullRegion(T);
    const z = zoomRegion(full, 8, T, 0.25, 0.75);
    expect(z).toEqual({ q0: 1792, q1: 2816, k0: 5376, k1: 6400 });
    expect(regionCells(z)).toBe(1024 * 1024);
    expect(zoomRegion(z, 1 / 8, T, 0.25, 0.75)).toEqual(full);
    // Near an edge the region is shifted back inside rather than shrunk.
    expect(zoomRegion(full, 4, T, 0, 1)).toEqual({ q0: 0, q1: 2048, k0: 6144, k1: 8192 });
    // At most one token a side, however far one zooms.
    const tiny = zoomRegion({ q0: 10, q1: 12, k0: 10, k1: 12 }, 100, T);
    expect(tiny.q1 - tiny.q0).toBe(1);
  });
  it('panning stops at the edges', () => {
    const r = { q0: 100, q1: 200, k0: 8000, k1: 8100 };
    expect(panRegion(r, -150, 150, T)).toEqual({ q0: 0, q1: 100, k0: 8092, k1: 8192 });
    expect(clampRegion({ q0: -5, q1: 9000, k0: 3, k1: 3 }, T)).toEqual({ q0: 0, q1: 8192, k0: 3, k1: 4 });
  });
  it('a dragged rectangle becomes the token region it covers', () => {
    expect(regionBetween({ q0: 0, q1: 1000, k0: 1000, k1: 2000 }, [0.5, 0.1], [0.2, 0.35], T)).toEqual({
      q0: 200,
      q1: 500,
      k0: 1100,
      k1: 1350,
    });
  });
});

describe('overview cells and pooling', () => {
  const info: OverviewInfo = { cells: 4, T: 10, starts: [0, 3, 5, 8, 10], max_tile_cells: 1 << 20 };
  it('cells covering a token range follow HeadOverview::cell_of', () => {
    expect(cellRange(info, 0, 10)).toEqual([0, 4]);
    expect(cellRange(info, 3, 5)).toEqual([1, 2]);
    expect(cellRange(info, 4, 9)).toEqual([1, 4]);
  });
  it('max pooling keeps a one-cell diagonal and marks wholly masked blocks', () => {
    const n = 6;
    const eye = new Float32Array(n * n);
    for (let i = 0; i < n; i++) eye[i * n + i] = 1;
    const p = maxPoolRect(eye, n, n, 3, 3);
    expect(Array.from(p.data)).toEqual([1, 0, 0, 0, 1, 0, 0, 0, 1]);
    // The zoom map's rule: pooled cell (i, j) of a block placed at (q0, k0) in the text covers
    // tokens q0 + poolBounds(i) × k0 + poolBounds(j).
    const masked = (i: number, j: number, rows: number, cols: number, R: number, C: number, q0: number, k0: number) => {
      const [r0, r1] = poolBounds(i, rows, R),
        [c0, c1] = poolBounds(j, cols, C);
      return unitMask(true)!.block(q0 + r0, q0 + r1, k0 + c0, k0 + c1);
    };
    expect(masked(0, 1, n, n, 3, 3, 0, 0)).toBe(true); // rows 0–1, keys 2–3
    expect(masked(1, 1, n, n, 3, 3, 0, 0)).toBe(false);
    // A block placed in the text: rows 100–101, keys 90–91 are visible to them.
    expect(masked(0, 0, 2, 2, 1, 1, 100, 90)).toBe(false);
    expect(masked(0, 0, 2, 2, 1, 1, 100, 102)).toBe(true);
  });
});

describe('long-text helpers for the model overview, Compare and Head lines', () => {
  const info: OverviewInfo = { cells: 3, T: 7, starts: [0, 2, 4, 7], max_tile_cells: 1024 };
  it('overviewPart picks one head’s summed or largest weights', () => {
    const data = Float32Array.from({ length: 2 * 2 * 9 }, (_, i) => i);
    expect(Array.from(overviewPart({ data }, 1, 0, 3))).toEqual([18, 19, 20, 21, 22, 23, 24, 25, 26]);
    expect(overviewPart({ data }, 1, 1, 3)[0]).toBe(27);
  });
  it('blockMass divides each block by its rows, so rows sum to 1', () => {
    // A causal head that looks at the first token only: block 0 of every row holds all the weight.
    const sum = new Float32Array([2, 0, 0, 2, 0, 0, 3, 0, 0]);
    const m = blockMass(sum, info);
    expect(Array.from(m)).toEqual([1, 0, 0, 1, 0, 0, 1, 0, 0]);
  });
  it('linesWindow follows a small region and falls back to a window of its own', () => {
    const small = { q0: 100, q1: 140, k0: 90, k1: 130 };
    expect(linesWindow(small, 8192, 0)).toEqual({ ...small, follows: true });
    expect(linesWindow(fullRegion(8192), 8192, 4000)).toEqual({
      q0: 4000,
      q1: 4064,
      k0: 4000,
      k1: 4064,
      follows: false,
    });
    expect(linesWindow(undefined, 8192, 8190)).toEqual({ q0: 8128, q1: 8192, k0: 8128, k1: 8192, follows: false });
    expect(linesWindow(undefined, 20, 5)).toEqual({ q0: 0, q1: 20, k0: 0, k1: 20, follows: false });
    // A region of another, longer text is not followed.
    expect(linesWindow({ q0: 600, q1: 610, k0: 600, k1: 610 }, 500, 0).follows).toBe(false);
  });
});
