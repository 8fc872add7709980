import { describe, expect, it } from 'vitest';
import {
  buildLut,
  contrastRatio,
  hexToRgb,
  lutColour,
  readableOn,
  scaleTicks,
  scaleValue,
  SEQUENTIAL,
  signedColour,
  DIVERGING,
} from './colour';
import { TEXT_PAIRS } from './theme';

describe('colour scales', () => {
  it('maps weights to colour positions', () => {
    expect(scaleValue(0.3, 'linear')).toBeCloseTo(0.3);
    expect(scaleValue(0.25, 'contrast')).toBeCloseTo(0.5);
    // log: 0.001 → 0, 0.01 → 1/3, 0.1 → 2/3, 1 → 1.
    expect(scaleValue(0.001, 'log')).toBe(0);
    expect(scaleValue(0.01, 'log')).toBeCloseTo(1 / 3);
    expect(scaleValue(0.1, 'log')).toBeCloseTo(2 / 3);
    expect(scaleValue(1, 'log')).toBeCloseTo(1);
    expect(scaleValue(1e-6, 'log')).toBe(0);
  });

  it('clamps out-of-range and non-finite inputs', () => {
    expect(scaleValue(1.5, 'linear')).toBe(1);
    expect(scaleValue(-0.1, 'contrast')).toBe(0);
    expect(scaleValue(NaN, 'linear')).toBe(0);
  });

  it('places legend ticks where their colours are', () => {
    for (const scale of ['linear', 'log', 'contrast'] as const)
      for (const t of scaleTicks(scale)) expect(t.position).toBeCloseTo(scaleValue(t.value, scale));
    expect(scaleTicks('linear').map((t) => t.label)).toEqual(['0.0', '0.25', '0.5', '0.75', '1.0']);
    expect(scaleTicks('log').map((t) => t.position.toFixed(3))).toEqual(['0.000', '0.333', '0.667', '1.000']);
  });

  it('builds a lookup table that starts and ends on the first and last stops', () => {
    const lut = buildLut(SEQUENTIAL);
    expect(lutColour(lut, 0)).toEqual(hexToRgb(SEQUENTIAL[0]));
    expect(lutColour(lut, 1)).toEqual(hexToRgb(SEQUENTIAL[SEQUENTIAL.length - 1]));
    // Darker (lower luminance) as the weight grows: the scale is monotone.
    let last = Infinity;
    for (let i = 0; i <= 10; i++) {
      const [r, g, b] = lutColour(lut, i / 10);
      const y = 0.2126 * r + 0.7152 * g + 0.0722 * b;
      expect(y).toBeLessThan(last);
      last = y;
    }
  });

  it('centres signed colours on white-ish zero', () => {
    expect(signedColour(0, 1)).toBe(DIVERGING[2]);
    expect(signedColour(-1, 1)).toBe(DIVERGING[0]);
    expect(signedColour(5, 1)).toBe(DIVERGING[4]);
  });
});

describe('contrast', () => {
  it('matches the WCAG reference values', () => {
    expect(contrastRatio('#000000', '#ffffff')).toBeCloseTo(21, 5);
    expect(contrastRatio('#ffffff', '#ffffff')).toBeCloseTo(1, 5);
    // #777777 on white is the classic just-below-AA grey: 4.48.
    expect(contrastRatio('#777777', '#ffffff')).toBeCloseTo(4.48, 2);
  });

  it('keeps every text colour of the theme at AA (4.5:1) or better', () => {
    for (const [fg, bg, what] of TEXT_PAIRS) expect(contrastRatio(fg, bg), what).toBeGreaterThanOrEqual(4.5);
  });

  it('picks a readable label colour for any background', () => {
    expect(readableOn('#0b2f6b')).toBe('#ffffff');
    expect(readableOn('#f7f9fc')).toBe('#111111');
    for (const c of [...SEQUENTIAL, ...DIVERGING]) expect(contrastRatio(readableOn(c), c)).toBeGreaterThanOrEqual(4.5);
  });
});

describe('heatmap pixels', () => {
  it('colour every cell as attentionColour does, on every scale', async () => {
    const { matrixPixels } = await import('./heatmap');
    const { attentionColour } = await import('./colour');
    const values = [0, 1e-4, 0.0011, 0.004, 0.02, 0.1, 0.33, 0.5, 0.9, 1, 1.2, NaN, -0.1, 0.75, 0.01, 0.25];
    for (const scale of ['linear', 'log', 'contrast'] as const) {
      const p = matrixPixels({ n: 4, data: new Float32Array(values) }, scale);
      values.forEach((v, i) => {
        const hex = '#' + [0, 1, 2].map((c) => p.data[i * 4 + c].toString(16).padStart(2, '0')).join('');
        // Quantising the weight to 1/65535 may move a colour by at most one table step.
        const want = hexToRgb(attentionColour(v, scale));
        const got = hexToRgb(hex);
        for (let c = 0; c < 3; c++) expect(Math.abs(got[c] - want[c]), `${scale} ${v}`).toBeLessThanOrEqual(8);
        expect(p.data[i * 4 + 3]).toBe(255);
      });
    }
  });
});
