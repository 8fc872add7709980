// Pure helpers over an importance reply (POST /api/importance): a head's rank and effect in words,
// how concentrated the effects are, and which heads matter least. No DOM here (importance.test.ts).

import type { ImportanceResult } from '../../lib/api';

/** Models with at most this many heads get their importance measured as soon as a short text is
 *  analysed (all-MiniLM-L6-v2's 72 heads: well under a second); larger ones wait for the button
 *  (SmolLM2's 270 heads take seconds). */
export const AUTO_IMPORTANCE_MAX_HEADS = 100;
/** ... and only for texts of at most this many tokens (a sentence or two). */
export const AUTO_IMPORTANCE_MAX_TOKENS = 64;

/** The effect's unit as the page writes it. */
export function unitLabel(unit: ImportanceResult['unit']): string {
  return unit === 'nats' ? 'Δ loss, nats' : '1 − cos';
}

/** A small effect with enough digits to tell heads apart: 0.000123 → "1.23e-4", 0.0412 → "0.0412". */
export function effectText(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  const a = Math.abs(v);
  if (a === 0) return '0';
  if (a < 1e-3) return v.toExponential(2);
  return v.toPrecision(3);
}

/** "importance #3 of 72 (0.0412 1 − cos)" for head `index` (layer-major). */
export function rankText(imp: ImportanceResult, index: number): string {
  const n = imp.importance.length;
  const head = imp.importance[index];
  return `importance #${head.rank} of ${n} (${effectText(head.ablation)} ${unitLabel(imp.unit)})`;
}

/** The effect of removing head `index` (layer-major) alone. */
export function effectOf(imp: ImportanceResult, index: number): number | null {
  return imp.importance[index]?.ablation ?? null;
}

/** The rank of head `index` (layer-major): 1 for the largest effect. */
export function rankOf(imp: ImportanceResult, index: number): number {
  return imp.importance[index].rank;
}

/** Layer-major head indices, most important first (ties: layer-major order). */
export function byImportance(imp: ImportanceResult): number[] {
  return imp.importance
    .map((x, i) => [x.rank, i] as const)
    .sort((a, b) => a[0] - b[0])
    .map(([, i]) => i);
}

/** The share of the summed positive effects that the `k` most important heads carry (0 when no
 *  head has a positive effect). A decoder head can lower the loss: negative effects count as 0. */
export function topShare(imp: ImportanceResult, k: number): number {
  const values = imp.importance.map((x) => Math.max(0, x.ablation ?? 0));
  const total = values.reduce((a, b) => a + b, 0);
  if (total <= 0) return 0;
  const top = byImportance(imp)
    .slice(0, k)
    .reduce((a, i) => a + values[i], 0);
  return top / total;
}

/** The `n` least important heads as [layer, head] pairs, least important first. */
export function leastImportant(imp: ImportanceResult, n: number): [number, number][] {
  const H = imp.shape[1];
  return byImportance(imp)
    .reverse()
    .slice(0, n)
    .map((i) => [Math.floor(i / H), i % H]);
}

/** Width of a head's importance bar, 0..1: its effect over the largest effect. */
export function barFraction(imp: ImportanceResult, index: number): number {
  const max = Math.max(0, ...imp.importance.map((x) => x.ablation ?? 0));
  const v = imp.importance[index].ablation ?? 0;
  return max > 0 ? Math.max(0, Math.min(1, v / max)) : 0;
}

/** The work the server allows one importance request: tokens × heads (include/headscope/limits.h,
 *  kMaxImportanceTokenPasses; the server refuses longer texts with "text_too_long"). Kept here so
 *  that the page offers the button only where it can work. */
export const IMPORTANCE_TOKEN_PASSES = 16384;

/** The longest text (tokens, special tokens included) whose importance the server measures. */
export function importanceMaxTokens(nHeads: number): number {
  return Math.floor(IMPORTANCE_TOKEN_PASSES / Math.max(1, nHeads));
}

/** Why importance cannot be measured on a text of `nTokens` tokens, in words, with the way out;
 *  null when it can. */
export function importanceTooLong(nTokens: number, nHeads: number): string | null {
  const max = importanceMaxTokens(nHeads);
  if (nTokens <= max) return null;
  return `Measuring importance reruns the text once for each of the ${nHeads} heads, which this server does for texts of up to ${max} tokens; this text has ${nTokens}. Shorten it to ${max} tokens or fewer, or remove single heads with “Ablate this head”.`;
}

/** The server's refusal of an importance request in words: a text too long for it says what to
 *  do (the server's own message names internal constants); anything else keeps its message,
 *  without internal names. */
export function importanceRefusal(code: string, message: string, nHeads: number): string {
  const m = /the text is (\d+) tokens/.exec(message);
  if (code === 'text_too_long' && m) return importanceTooLong(Number(m[1]), nHeads) ?? message;
  return `Importance could not be measured: ${message.replace(/\s*\(?limits::\w+\)?/g, '')}`;
}
