// Number formatting shared by every view, so that the same value reads the same everywhere
// (and the end-to-end test can compare what is shown with the API's numbers).

/** A statistic with `digits` decimals; null (no sample) reads as an en dash. */
export function fixed(v: number | null | undefined, digits = 2): string {
  return v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(digits);
}

/** A share in [0, 1] as a whole percentage. */
export function percent(v: number | null | undefined, digits = 0): string {
  return v === null || v === undefined || !Number.isFinite(v) ? '–' : `${(v * 100).toFixed(digits)} %`;
}

/** Compact signed value for vector read-outs: 4 significant digits. */
export function signed(v: number): string {
  if (!Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e4 ? v.toPrecision(4) : v.toExponential(2);
}

/** Subscript digits for head labels in formulas: head₁₁. */
export function subscript(n: number): string {
  const digits = '₀₁₂₃₄₅₆₇₈₉';
  return String(n)
    .split('')
    .map((c) => (c === '-' ? '₋' : digits[Number(c)]))
    .join('');
}

/** Token text as shown in labels: word pieces keep their "##" so the split stays visible. */
export function tokenLabel(text: string, maxLength = 14): string {
  const t = text.replace(/\s+/g, ' ');
  return t.length > maxLength ? t.slice(0, maxLength - 1) + '…' : t;
}

/** A token as a reader sees it: a leading space as ␣, line breaks as ↵, tabs as ⇥ (the logit
 *  lenses list tokens by their decoded text, " Paris", where a space would not show). */
export function visibleToken(text: string): string {
  return text.replace(/^ /, '␣').replace(/\n/g, '↵').replace(/\t/g, '⇥');
}

/** "multi-query attention" → "Multi-query attention". */
export function sentenceCase(text: string): string {
  return text.charAt(0).toUpperCase() + text.slice(1);
}
