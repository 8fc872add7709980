// The gradient side of the Patching view with no DOM: the words of the three methods of a sweep
// (exact patching, attribution patching's first-order estimate, both), how the estimate agrees
// with the exact sweep (the agreement line, the misranked sites with their two ranks), the
// strongest estimated edges between heads, and saliency's colour scale, captions and the request
// it sends (a decoder's answer pair filled from the model's own prediction when left empty).

import type {
  ModelInfo,
  PatchAgreement,
  PatchEdge,
  PatchEffect,
  PatchMethod,
  PatchMetric,
  PathInput,
  SaliencyMethod,
  SaliencyRequest,
  SaliencyResult,
  SaliencyToken,
} from '../../lib/api';
import { headTag } from '../../lib/numbering';

export const METHODS: readonly PatchMethod[] = ['exact', 'attribution', 'both'];

export const METHOD_LABELS: Record<PatchMethod, string> = {
  exact: 'exact: patch each site in its own run',
  attribution: 'attribution: estimate every site from gradients',
  both: 'both: exact and estimate side by side',
};

/** How many edges the page lists (the strongest by |value|). */
export const EDGES_SHOWN = 10;

/** A number as the agreement line writes it: three decimals, "–" where undefined. */
function three(v: number | null | undefined): string {
  return v === null || v === undefined || !Number.isFinite(v) ? '–' : v.toFixed(3);
}

/** The note under an estimate: what it is, what it cost, and when to distrust it. */
export function estimateNote(
  method: PatchMethod,
  a: { forward_passes: number; backward_passes: number; seconds: { wall: number } },
  exactPasses?: number,
): string {
  const cost = `${a.forward_passes} forward ${a.forward_passes === 1 ? 'pass' : 'passes'} and ${a.backward_passes} backward ${a.backward_passes === 1 ? 'pass' : 'passes'} (${a.seconds.wall.toFixed(2)} s)`;
  const first =
    'Attribution patching is a first-order estimate: it takes the gradient of the metric once and assumes the metric moves in a straight line as each activation moves from one run’s value to the other’s.';
  if (method === 'both')
    return `${first} Here it cost ${cost} for every site at once; exact patching ran ${exactPasses ?? '–'} patched runs, one per site.`;
  return `${first} One backward pass gives every site at once — ${cost}, much faster than a patched run per site — but a site whose effect is far from a straight line (an attention pattern that flips, a saturated probability) can be misjudged. Choose “both” to check it against exact patching.`;
}

/** "Spearman ρ 0.998 · Pearson r 1.000 · 9 of the exact top 10 also in the estimate's top 10 · 72 sites". */
export function agreementLine(a: PatchAgreement): string {
  const k = Math.min(10, a.sites);
  return `Spearman ρ ${three(a.spearman)} · Pearson r ${three(a.pearson)} · ${a.top10_shared} of the exact top ${k} also in the estimate’s top ${k} · ${a.sites} sites`;
}

/** A plain reading of the rank correlation, for a student. */
export function agreementVerdict(spearman: number | null): string {
  if (spearman === null || !Number.isFinite(spearman))
    return 'The ranks cannot be compared (no spread in the effects).';
  if (spearman >= 0.9) return 'The estimate ranks the sites almost as exact patching does.';
  if (spearman >= 0.6) return 'The estimate gets the broad order right but not the details.';
  return 'The estimate ranks the sites quite differently from exact patching: trust the exact map.';
}

/** Ranks of `values` with 1 for the largest, ties sharing their mean rank; non-finite values last. */
export function ranksOf(values: readonly (number | null)[]): number[] {
  const key = (v: number | null) => (v === null || !Number.isFinite(v) ? -Infinity : v);
  const order = values.map((_, i) => i).sort((a, b) => key(values[b]) - key(values[a]) || a - b);
  const ranks = new Array<number>(values.length);
  for (let i = 0; i < order.length;) {
    let j = i;
    while (j + 1 < order.length && key(values[order[j + 1]]) === key(values[order[i]])) j++;
    for (let k = i; k <= j; k++) ranks[order[k]] = (i + j) / 2 + 1;
    i = j + 1;
  }
  return ranks;
}

/** One site's identity: site, layer, head and position. */
export function siteKey(e: Pick<PatchEffect, 'site' | 'layer' | 'head' | 'position'>): string {
  return `${e.site}|${e.layer}|${e.head ?? ''}|${e.position ?? ''}`;
}

export interface MisrankedRow {
  exact: PatchEffect;
  estimate: PatchEffect | null;
  /** Ranks by normalised effect, 1 for the one that restores most. */
  exactRank: number;
  estimateRank: number | null;
}

/** The misranked sites of an agreement with both ranks, from the two sweeps' results. */
export function misrankedRows(
  exact: readonly PatchEffect[],
  estimate: readonly PatchEffect[],
  misranked: readonly PatchEffect[],
): MisrankedRow[] {
  const exactRank = new Map<string, number>();
  ranksOf(exact.map((e) => e.normalised)).forEach((r, i) => exactRank.set(siteKey(exact[i]), r));
  const estimateAt = new Map<string, [PatchEffect, number]>();
  ranksOf(estimate.map((e) => e.normalised)).forEach((r, i) => estimateAt.set(siteKey(estimate[i]), [estimate[i], r]));
  return misranked.map((m) => {
    const key = siteKey(m);
    const est = estimateAt.get(key);
    return {
      exact: m,
      estimate: est?.[0] ?? null,
      exactRank: exactRank.get(key) ?? NaN,
      estimateRank: est?.[1] ?? null,
    };
  });
}

/** "L29 H1", "L3 (attention block)", "L2 · position 4": a site as the lists name it. */
export function siteName(e: Pick<PatchEffect, 'site' | 'layer' | 'head' | 'position'>): string {
  const parts = [e.head !== null && e.head !== undefined ? headTag(e.layer, e.head) : `L${e.layer + 1}`];
  if (e.site === 'k' || e.site === 'v') parts[0] = `L${e.layer + 1} KV ${(e.head ?? 0) + 1}`;
  if (e.site === 'attn') parts.push('attention block');
  if (e.site === 'mlp') parts.push('feed-forward block');
  if (e.position !== null && e.position !== undefined) parts.push(`position ${e.position}`);
  return parts.join(' · ');
}

/** The `k` edges of largest |value| (the estimated change of the metric along each), largest first. */
export function topEdges(edges: readonly PatchEdge[], k = EDGES_SHOWN): PatchEdge[] {
  return edges
    .filter((e) => e.value !== null && Number.isFinite(e.value))
    .sort((a, b) => Math.abs(b.value!) - Math.abs(a.value!))
    .slice(0, k);
}

const INPUT_WORDS: Record<PathInput, string> = { q: 'queries', k: 'keys', v: 'values', logits: 'logits' };

/** "L1 H2 → L3 H4 (its keys)", "L29 H1 → the logits". */
export function edgeName(e: Pick<PatchEdge, 'sender' | 'receiver' | 'input'>): string {
  const from = headTag(e.sender[0], e.sender[1]);
  if (!e.receiver || e.input === 'logits') return `${from} → the logits`;
  return `${from} → ${headTag(e.receiver[0], e.receiver[1])} (its ${INPUT_WORDS[e.input]})`;
}

/** The line an encoder gets beside the edges switch: why there are none to estimate. */
export function encoderEdgesLine(name: string): string {
  return `Edges need a decoder: ${name} is a post-norm encoder, whose LayerNorm after every layer rescales the whole stream, so there is no shared residual stream along which one head’s output reaches another. Sites can still be estimated.`;
}

// ---- saliency ----

export const SALIENCY_METHOD_LABELS: Record<SaliencyMethod, string> = {
  integrated_gradients: 'integrated gradients',
  grad_x_input: 'gradient × input',
};

/** Points along the path that integrated gradients may take (the server's default is 50). */
export const SALIENCY_STEPS: readonly number[] = [10, 25, 50, 100];

/** The colour scale's half-width: the largest |score|, rounded up to two significant digits. */
export function saliencyLimit(tokens: readonly Pick<SaliencyToken, 'score'>[]): number {
  let m = 0;
  for (const t of tokens) if (t.score !== null && Number.isFinite(t.score)) m = Math.max(m, Math.abs(t.score));
  if (m === 0) return 1;
  const p = 10 ** (Math.floor(Math.log10(m)) - 1);
  return Math.ceil(m / p - 1e-9) * p;
}

/** The legend's caption: what blue and red mean for this metric. */
export function saliencyCaption(metric: PatchMetric): string {
  switch (metric) {
    case 'logit_diff':
      return 'score (blue: pushes towards the answer over the wrong token, red: away from it)';
    case 'prob':
      return 'score (blue: raises the answer’s probability, red: lowers it)';
    case 'loss':
      return 'score (blue: raises the answer’s loss, red: lowers it, i.e. helps)';
    case 'cosine':
      return 'score (blue: moves the embedding away from the reference, red: towards it)';
  }
}

/** A score or metric with four significant digits (small ones in exponent form). */
export function saliencyNumber(v: number | null | undefined): string {
  if (v === null || v === undefined || !Number.isFinite(v)) return '–';
  if (v === 0) return '0';
  const a = Math.abs(v);
  return a >= 1e-3 && a < 1e4 ? v.toPrecision(4) : v.toExponential(2);
}

/** The completeness gap in one line, with what it means; gradient × input has none. */
export function gapLine(r: Pick<SaliencyResult, 'method' | 'completeness_gap' | 'value' | 'baseline_value'>): string {
  if (r.method !== 'integrated_gradients' || r.completeness_gap === undefined)
    return 'Gradient × input is a one-step linear guess, so its scores need not add up to anything: there is no completeness gap to report.';
  const change = (r.value ?? NaN) - (r.baseline_value ?? NaN);
  const share =
    Number.isFinite(change) && change !== 0 && r.completeness_gap !== null
      ? ` (${Math.abs((r.completeness_gap / change) * 100).toFixed(1)} % of the change)`
      : '';
  return `Completeness gap ${saliencyNumber(r.completeness_gap)}${share}: the scores should add up to the metric at the text minus the metric at the baseline; the gap is what they miss. More steps make it smaller.`;
}

/** What the panel needs to ask for saliency. */
export interface SaliencyInputs {
  text: string;
  method: SaliencyMethod;
  steps: number;
  metric: PatchMetric;
  answer: string;
  wrong: string;
  reference: string;
}

/** The request for `inputs` on `model`: decoders send the answer pair, encoders the reference. */
export function saliencyRequest(model: Pick<ModelInfo, 'causal'>, i: SaliencyInputs): SaliencyRequest {
  const r: SaliencyRequest = { text: i.text, method: i.method, metric: model.causal ? i.metric : 'cosine' };
  if (i.method === 'integrated_gradients') r.steps = i.steps;
  if (model.causal) Object.assign(r, { answer: i.answer, wrong: i.wrong });
  else r.reference = i.reference;
  return r;
}

/** A decoder's answer pair with empty boxes filled from the model's likeliest next tokens
 *  (`top`, most likely first): the answer the first that is not the wrong one, the wrong token the
 *  first that is not the answer. */
export function defaultAnswers(
  answer: string,
  wrong: string,
  top: readonly string[],
): { answer: string; wrong: string } {
  const a = answer !== '' ? answer : (top.find((t) => t !== wrong) ?? '');
  const w = wrong !== '' ? wrong : (top.find((t) => t !== a) ?? '');
  return { answer: a, wrong: w };
}
