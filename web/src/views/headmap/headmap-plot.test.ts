import { describe, expect, it } from 'vitest';
import type { HeadMapResult } from '../../lib/api';
import { EXPORT_NUMBERING } from '../../lib/export';
import { explainedText, headMapCsv, headMapJson, mapScale, nearestPoint, pointRadius } from './headmap-plot';

const result: HeadMapResult = {
  schema: 'headscope.head_map/1',
  n_layer: 2,
  n_head: 2,
  texts: 40,
  rows: 1098,
  explained: 0.474,
  eigenvalues: [14.08, 6.14],
  heads: [
    { layer: 0, head: 0, kv_head: 0, x: -1, y: 0.5 },
    { layer: 0, head: 1, kv_head: 0, x: 1, y: -0.5 },
    { layer: 1, head: 0, kv_head: 0, x: 0.25, y: 0 },
    { layer: 1, head: 1, kv_head: 0, x: 0, y: 0.25 },
  ],
  distance: [
    [0, 0.3, 0.2, 0.1],
    [0.3, 0, 0.2, 0.25],
    [0.2, 0.2, 0, 0.05],
    [0.1, 0.25, 0.05, 0],
  ],
  source: 'the first 40 sentences of UD EWT dev',
  cached: true,
};

describe('mapScale', () => {
  it('fits every point inside the padded box with one scale for both axes, y upwards', () => {
    const s = mapScale(result.heads, 400, 300, 20);
    // x spans 2 units over 360 px, y 1 unit over 260 px: x limits the scale.
    expect(s.k).toBeCloseTo(180);
    expect(s.px(-1)).toBeCloseTo(20);
    expect(s.px(1)).toBeCloseTo(380);
    expect(s.py(0)).toBeCloseTo(150);
    expect(s.py(0.5)).toBeLessThan(s.py(-0.5));
    expect(s.py(0.5) - s.py(-0.5)).toBeCloseTo(-180);
    for (const p of result.heads) {
      expect(s.px(p.x)).toBeGreaterThanOrEqual(20 - 1e-9);
      expect(s.px(p.x)).toBeLessThanOrEqual(380 + 1e-9);
      expect(s.py(p.y)).toBeGreaterThanOrEqual(20 - 1e-9);
      expect(s.py(p.y)).toBeLessThanOrEqual(280 + 1e-9);
    }
  });

  it('keeps distances in proportion on both axes', () => {
    const s = mapScale(result.heads, 500, 500, 10);
    const d = (a: { x: number; y: number }, b: { x: number; y: number }) =>
      Math.hypot(s.px(a.x) - s.px(b.x), s.py(a.y) - s.py(b.y));
    const [a, b, c] = result.heads;
    expect(d(a, b) / d(a, c)).toBeCloseTo(Math.hypot(2, 1) / Math.hypot(1.25, 0.5));
  });

  it('centres a single point or an empty map', () => {
    const one = mapScale([{ x: 3, y: 4 }], 100, 80, 5);
    expect(one.px(3)).toBe(50);
    expect(one.py(4)).toBe(40);
    const none = mapScale([], 100, 80, 5);
    expect(Number.isFinite(none.k)).toBe(true);
  });
});

describe('nearestPoint', () => {
  const pts = [
    { px: 10, py: 10 },
    { px: 30, py: 10 },
    { px: 100, py: 100 },
  ];
  it('finds the nearest point within the distance, or none', () => {
    expect(nearestPoint(pts, 12, 11, 10)).toBe(0);
    expect(nearestPoint(pts, 25, 10, 10)).toBe(1);
    expect(nearestPoint(pts, 60, 60, 10)).toBe(-1);
    expect(nearestPoint([], 0, 0, 10)).toBe(-1);
  });
});

describe('pointRadius', () => {
  it('is the base size without importance, and grows with the share of the largest effect', () => {
    expect(pointRadius(6, null)).toBe(6);
    expect(pointRadius(6, 0)).toBeCloseTo(3.6);
    expect(pointRadius(6, 1)).toBeCloseTo(12);
    expect(pointRadius(6, 0.25)).toBeLessThan(pointRadius(6, 0.5));
    expect(pointRadius(6, 2)).toBeCloseTo(12);
    expect(pointRadius(6, -1)).toBeCloseTo(3.6);
  });
});

describe('explainedText', () => {
  it('says the two axes’ share in words, as a whole percentage', () => {
    expect(explainedText(0.474)).toBe('the two axes hold 47 % of the differences between heads');
    expect(explainedText(1.2)).toContain('100 %');
  });
});

describe('head map downloads', () => {
  it('writes the JSON with heads counted from 1, the model, the numbering and the corpus', () => {
    const j = JSON.parse(headMapJson(result, 'SmolLM2-135M-Instruct'));
    expect(j.model).toBe('SmolLM2-135M-Instruct');
    expect(j.numbering).toBe(EXPORT_NUMBERING);
    expect(j.text).toBeNull();
    expect(j.source).toBe(result.source);
    expect(j.explained).toBe(0.474);
    expect(j.distance).toEqual(result.distance);
    expect(j.heads).toEqual(
      result.heads.map((p) => ({ ...p, layer: p.layer + 1, head: p.head + 1, kv_head: p.kv_head + 1 })),
    );
    expect(j.note).toMatch(/does not depend on the explorer's text/);
  });

  it('writes the CSV after # lines naming the model, the text-independence and the numbering', () => {
    const lines = headMapCsv(result, 'all-MiniLM-L6-v2').split('\r\n');
    expect(lines[0]).toMatch(/^# headscope head map/);
    expect(lines[1]).toBe('# model: all-MiniLM-L6-v2');
    expect(lines[2]).toMatch(/^# text: none; the map does not depend on the explorer's text/);
    expect(lines[2]).toContain('47 %');
    expect(lines[3]).toBe(`# numbering: ${EXPORT_NUMBERING}`);
    expect(lines[4]).toBe('layer,head,kv_head,x,y');
    expect(lines[5]).toBe('1,1,1,-1,0.5');
    expect(lines[8]).toBe('2,2,1,0,0.25');
    expect(lines[9]).toBe('');
    expect(lines).toHaveLength(10);
  });
});
