// Colour scales for attention (0–1), signed differences and vectors, plus the WCAG contrast
// check that keeps the explorer's text readable.

export type ScaleName = 'linear' | 'log' | 'contrast';
export const SCALES: readonly ScaleName[] = ['linear', 'log', 'contrast'];

/** Smallest weight the log scale separates from zero (10⁻³: one part in a thousand). */
export const LOG_FLOOR = 1e-3;

/**
 * Maps an attention weight in [0, 1] to a colour position in [0, 1].
 *  - linear: the weight itself;
 *  - log: log10 of the weight between LOG_FLOOR and 1, so that 0.001, 0.01, 0.1 and 1 are
 *    evenly spaced (weights below the floor share the lightest colour);
 *  - contrast: the square root, which lifts faint weights without losing the order.
 */
export function scaleValue(v: number, scale: ScaleName): number {
  const x = Number.isFinite(v) ? Math.min(1, Math.max(0, v)) : 0;
  switch (scale) {
    case 'linear':
      return x;
    case 'log':
      return x <= LOG_FLOOR ? 0 : (Math.log10(x) - Math.log10(LOG_FLOOR)) / -Math.log10(LOG_FLOOR);
    case 'contrast':
      return Math.sqrt(x);
  }
}

/** The weights labelled on a legend, with their positions along it. */
export function scaleTicks(scale: ScaleName): { value: number; label: string; position: number }[] {
  const values =
    scale === 'log' ? [0.001, 0.01, 0.1, 1] : scale === 'contrast' ? [0, 0.05, 0.25, 0.5, 1] : [0, 0.25, 0.5, 0.75, 1];
  return values.map((value) => ({ value, label: tickLabel(value), position: scaleValue(value, scale) }));
}

function tickLabel(v: number): string {
  if (v === 0 || v === 1) return v.toFixed(1);
  return String(v);
}

export type Rgb = [number, number, number];

export function hexToRgb(hex: string): Rgb {
  const h = hex.replace('#', '');
  if (!/^[0-9a-fA-F]{6}$/.test(h)) throw new Error(`not a #rrggbb colour: ${hex}`);
  return [parseInt(h.slice(0, 2), 16), parseInt(h.slice(2, 4), 16), parseInt(h.slice(4, 6), 16)];
}

export function rgbToHex([r, g, b]: Rgb): string {
  return '#' + [r, g, b].map((c) => Math.round(c).toString(16).padStart(2, '0')).join('');
}

/** Attention weights: from almost white to deep blue, monotone in lightness. */
export const SEQUENTIAL: readonly string[] = ['#f7f9fc', '#cfe0f1', '#8fbde0', '#4a8fc9', '#1f5fa6', '#0b2f6b'];
/** Signed values (differences, vector entries): red for negative, white at zero, blue for positive. */
export const DIVERGING: readonly string[] = ['#a4161a', '#e07a5f', '#f7f7f7', '#6fa8dc', '#1c4e9a'];

/** A 256-entry RGBA lookup table interpolated linearly between evenly spaced stops. */
export function buildLut(stops: readonly string[], size = 256): Uint8ClampedArray {
  const rgb = stops.map(hexToRgb);
  const lut = new Uint8ClampedArray(size * 4);
  for (let i = 0; i < size; i++) {
    const t = (i / (size - 1)) * (rgb.length - 1);
    const j = Math.min(rgb.length - 2, Math.floor(t));
    const f = t - j;
    for (let c = 0; c < 3; c++) lut[i * 4 + c] = Math.round(rgb[j][c] + (rgb[j + 1][c] - rgb[j][c]) * f);
    lut[i * 4 + 3] = 255;
  }
  return lut;
}

export const SEQUENTIAL_LUT = buildLut(SEQUENTIAL);
// An odd number of entries puts zero exactly on the middle stop.
export const DIVERGING_LUT = buildLut(DIVERGING, 255);

/** The colour at position t ∈ [0, 1] of a lookup table. */
export function lutColour(lut: Uint8ClampedArray, t: number): Rgb {
  const n = lut.length / 4;
  const i = Math.round(Math.min(1, Math.max(0, Number.isFinite(t) ? t : 0)) * (n - 1));
  return [lut[i * 4], lut[i * 4 + 1], lut[i * 4 + 2]];
}

/** Colour of an attention weight under a scale. */
export function attentionColour(v: number, scale: ScaleName): string {
  return rgbToHex(lutColour(SEQUENTIAL_LUT, scaleValue(v, scale)));
}

/** Colour of a signed value, symmetric around zero: ±limit are the ends of the diverging scale. */
export function signedColour(v: number, limit: number): string {
  return rgbToHex(lutColour(DIVERGING_LUT, limit > 0 ? 0.5 + 0.5 * (v / limit) : 0.5));
}

/** WCAG 2.x relative luminance of an sRGB colour. */
export function relativeLuminance(hex: string): number {
  const [r, g, b] = hexToRgb(hex).map((c) => {
    const s = c / 255;
    return s <= 0.04045 ? s / 12.92 : ((s + 0.055) / 1.055) ** 2.4;
  });
  return 0.2126 * r + 0.7152 * g + 0.0722 * b;
}

/** WCAG contrast ratio (1–21); 4.5 is the minimum for body text (AA), 3 for large text. */
export function contrastRatio(a: string, b: string): number {
  const la = relativeLuminance(a),
    lb = relativeLuminance(b);
  return (Math.max(la, lb) + 0.05) / (Math.min(la, lb) + 0.05);
}

/** Black or white, whichever reads better on `background` (for labels drawn on heatmap cells). */
export function readableOn(background: string): string {
  return contrastRatio('#111111', background) >= contrastRatio('#ffffff', background) ? '#111111' : '#ffffff';
}
