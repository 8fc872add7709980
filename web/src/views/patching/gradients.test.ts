import { describe, expect, it } from 'vitest';
import { ApiError, type PatchEdge, type PatchEffect, type PatchResult } from '../../lib/api';
import {
  agreementLine,
  agreementVerdict,
  defaultAnswers,
  edgeName,
  estimateNote,
  gapLine,
  misrankedRows,
  ranksOf,
  saliencyCaption,
  saliencyLimit,
  saliencyNumber,
  saliencyRequest,
  siteKey,
  siteName,
  topEdges,
} from './gradients';
import { patchCsv } from './patch-grid';
import { refusal, sweepSummary } from './patching-view';

const effect = (e: Partial<PatchEffect>): PatchEffect => ({
  site: 'head',
  layer: 0,
  head: 0,
  position: null,
  value: 0,
  normalised: 0,
  ...e,
});

const edge = (e: Partial<PatchEdge>): PatchEdge => ({
  sender: [0, 0],
  receiver: [1, 0],
  input: 'q',
  value: 0,
  normalised: 0,
  ...e,
});

describe('ranksOf', () => {
  it('ranks the largest first and gives ties their mean rank', () => {
    expect(ranksOf([0.1, 0.5, 0.3])).toEqual([3, 1, 2]);
    expect(ranksOf([0.2, 0.2, 1, 0])).toEqual([2.5, 2.5, 1, 4]);
  });
  it('puts missing values last', () => {
    expect(ranksOf([null, 1, NaN, 2])).toEqual([3.5, 2, 3.5, 1]);
    expect(ranksOf([])).toEqual([]);
  });
});

describe('misrankedRows', () => {
  it("pairs each misranked site with the estimate of the same site and both sweeps' ranks", () => {
    const exact = [
      effect({ head: 0, normalised: 0.9 }),
      effect({ head: 1, normalised: 0.1 }),
      effect({ head: 2, normalised: 0.5 }),
    ];
    const estimate = [
      effect({ head: 0, normalised: 0.8 }),
      effect({ head: 1, normalised: 0.6 }),
      effect({ head: 2, normalised: 0.2 }),
    ];
    const rows = misrankedRows(exact, estimate, [exact[1], exact[2]]);
    expect(rows.map((r) => [r.exact.head, r.exactRank, r.estimateRank, r.estimate?.normalised])).toEqual([
      [1, 3, 2, 0.6],
      [2, 2, 3, 0.2],
    ]);
  });
  it('tells sites apart by site, layer, head and position', () => {
    expect(siteKey(effect({ site: 'resid', head: null, position: 3 }))).toBe('resid|0||3');
    const rows = misrankedRows([effect({ layer: 1 })], [effect({ layer: 2 })], [effect({ layer: 1 })]);
    expect(rows[0].estimate).toBeNull();
    expect(rows[0].estimateRank).toBeNull();
  });
});

describe('agreement words', () => {
  it('writes the agreement line with the top-k of a small sweep', () => {
    expect(agreementLine({ spearman: 0.99791, pearson: 0.99991, top10_shared: 10, sites: 18, misranked: [] })).toBe(
      'Spearman ρ 0.998 · Pearson r 1.000 · 10 of the exact top 10 also in the estimate’s top 10 · 18 sites',
    );
    expect(agreementLine({ spearman: null, pearson: null, top10_shared: 3, sites: 3, misranked: [] })).toMatch(
      /^Spearman ρ – · Pearson r – · 3 of the exact top 3 also in the estimate’s top 3 · 3 sites$/,
    );
  });
  it('reads the rank correlation in words', () => {
    expect(agreementVerdict(0.95)).toMatch(/almost as exact patching/);
    expect(agreementVerdict(0.7)).toMatch(/broad order/);
    expect(agreementVerdict(0.1)).toMatch(/trust the exact map/);
    expect(agreementVerdict(null)).toMatch(/cannot be compared/);
  });
  it('says what the estimate cost, and that it is first-order', () => {
    const a = { forward_passes: 2, backward_passes: 1, seconds: { wall: 0.25 } };
    expect(estimateNote('attribution', a)).toMatch(
      /first-order estimate.*One backward pass.*2 forward passes and 1 backward pass \(0\.25 s\)/,
    );
    expect(estimateNote('both', a, 72)).toMatch(/exact patching ran 72 patched runs/);
  });
});

describe('sites and edges', () => {
  it('names sites as the page numbers them', () => {
    expect(siteName(effect({ layer: 28, head: 1 }))).toBe('L29 H2');
    expect(siteName(effect({ site: 'k', layer: 2, head: 0, group: [0, 1, 2] }))).toBe('L3 KV 1');
    expect(siteName(effect({ site: 'mlp', layer: 4, head: null }))).toBe('L5 · feed-forward block');
    expect(siteName(effect({ site: 'resid', layer: 0, head: null, position: 7 }))).toBe('L1 · position 7');
  });
  it('keeps the strongest edges by |value|, skipping missing ones', () => {
    const edges = [edge({ value: 0.1 }), edge({ value: -2 }), edge({ value: null }), edge({ value: 1 })];
    expect(topEdges(edges, 2).map((e) => e.value)).toEqual([-2, 1]);
    expect(topEdges(edges).length).toBe(3);
  });
  it('names an edge by its sender, receiver and input', () => {
    expect(edgeName(edge({ sender: [0, 1], receiver: [2, 3], input: 'k' }))).toBe('L1 H2 → L3 H4 (its keys)');
    expect(edgeName(edge({ sender: [23, 3], receiver: null, input: 'logits' }))).toBe('L24 H4 → the logits');
  });
});

describe('saliency helpers', () => {
  it('scales colours to the largest |score|, rounded up to two digits', () => {
    expect(saliencyLimit([{ score: 0.1234 }, { score: -0.5 }, { score: null }])).toBe(0.5);
    expect(saliencyLimit([{ score: 10.28 }, { score: -21.03 }])).toBe(22);
    expect(saliencyLimit([{ score: 0 }])).toBe(1);
  });
  it('writes numbers with four significant digits', () => {
    expect(saliencyNumber(6.11958)).toBe('6.120');
    expect(saliencyNumber(1.7e-5)).toBe('1.70e-5');
    expect(saliencyNumber(0)).toBe('0');
    expect(saliencyNumber(null)).toBe('–');
  });
  it('explains the completeness gap, or its absence', () => {
    const ig = {
      method: 'integrated_gradients' as const,
      value: 0.25,
      baseline_value: 0.75,
      completeness_gap: 0.005,
    };
    expect(gapLine(ig)).toBe(
      'Completeness gap 0.005000 (1.0 % of the change): the scores should add up to the metric at the text minus the metric at the baseline; the gap is what they miss. More steps make it smaller.',
    );
    expect(gapLine({ method: 'grad_x_input', value: 1 })).toMatch(/no completeness gap/);
  });
  it('says what blue and red mean for each metric', () => {
    expect(saliencyCaption('logit_diff')).toMatch(/blue: pushes towards the answer/);
    expect(saliencyCaption('cosine')).toMatch(/away from the reference/);
  });
  it('asks decoders with the answer pair and encoders with the reference', () => {
    const inputs = {
      text: 'a b',
      method: 'integrated_gradients' as const,
      steps: 25,
      metric: 'prob' as const,
      answer: ' x',
      wrong: ' y',
      reference: 'c',
    };
    expect(saliencyRequest({ causal: true }, inputs)).toEqual({
      text: 'a b',
      method: 'integrated_gradients',
      metric: 'prob',
      steps: 25,
      answer: ' x',
      wrong: ' y',
    });
    expect(saliencyRequest({ causal: false }, { ...inputs, method: 'grad_x_input' })).toEqual({
      text: 'a b',
      method: 'grad_x_input',
      metric: 'cosine',
      reference: 'c',
    });
  });
  it("fills empty answer boxes from the model's prediction, never with the same token twice", () => {
    expect(defaultAnswers('', '', [' Mary', ' John', ' the'])).toEqual({ answer: ' Mary', wrong: ' John' });
    expect(defaultAnswers(' John', '', [' John', ' Mary'])).toEqual({ answer: ' John', wrong: ' Mary' });
    expect(defaultAnswers('', ' Mary', [' Mary', ' John'])).toEqual({ answer: ' John', wrong: ' Mary' });
    expect(defaultAnswers(' a', ' b', [])).toEqual({ answer: ' a', wrong: ' b' });
    expect(defaultAnswers('', '', [])).toEqual({ answer: '', wrong: '' });
  });
});

describe('a sweep with estimates', () => {
  const base: PatchResult = {
    schema: 'headscope.patch/1',
    task: 'custom',
    seed: 0,
    seconds: { wall: 0.18, cpu: 0.18 },
    n_pairs: 1,
    metric: 'logit_diff',
    direction: 'denoise',
    clean: 2,
    corrupt: -1,
    passes: 2,
    results: [effect({ head: 0, value: 0.5, normalised: 0.5 }), effect({ head: 1, value: -1, normalised: 0 })],
  };
  const attribution = {
    results: [effect({ head: 1, value: -0.9, normalised: 0.03 }), effect({ head: 0, value: 0.4, normalised: 0.45 })],
    clean: 2,
    corrupt: -1,
    edges: [],
    forward_passes: 2,
    backward_passes: 1,
    seconds: { wall: 0.06, cpu: 0.06 },
  };
  it('writes each site with its estimate beside it (both)', () => {
    const csv = patchCsv({ ...base, method: 'both', attribution }, 'm', 't').split('\r\n');
    expect(csv).toContain('site,layer,head,position,value,normalised,estimate_value,estimate_normalised');
    expect(csv).toContain('head,1,1,,0.5,0.5,0.4,0.45');
    expect(csv).toContain('head,1,2,,-1,0,-0.9,0.03');
    expect(csv[0]).toMatch(/activation patching beside attribution patching’s estimates/);
  });
  it('keeps the plain columns for exact and attribution alone', () => {
    expect(patchCsv(base)).toContain('site,layer,head,position,value,normalised\r\n');
    expect(patchCsv({ ...base, method: 'attribution', attribution })).toMatch(/attribution patching \(first-order/);
  });
  it('says in the summary what each method cost', () => {
    expect(sweepSummary(base)).toMatch(/· denoise · 2 patched runs in 0\.2 s\. Colour/);
    expect(sweepSummary({ ...base, method: 'attribution', passes: 0, attribution })).toMatch(
      /estimated from 2 forward and 1 backward pass in 0\.06 s\./,
    );
    expect(sweepSummary({ ...base, method: 'both', attribution })).toMatch(
      /exact: 2 patched runs in 0\.2 s; estimate: 2 forward and 1 backward pass in 0\.06 s\./,
    );
  });
});

describe('refusals of the gradient requests', () => {
  it('drops the prompt-pair prefix of a bad field and keeps the reason', () => {
    const e = new ApiError(
      400,
      'bad_field',
      'prompt pair 1 ("hi"): the answer " Mary Ann" is 2 tokens for this model; it must be one token',
    );
    expect(refusal(e)).toBe('The answer " Mary Ann" is 2 tokens for this model; it must be one token');
    expect(refusal(new ApiError(400, 'bad_field', 'all-MiniLM-L6-v2 is a post-norm encoder: …'))).toBe(
      'all-MiniLM-L6-v2 is a post-norm encoder: …',
    );
  });
});
