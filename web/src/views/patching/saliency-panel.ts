// Saliency in the Patching view (POST /api/saliency): each token of the clean prompt coloured by
// how much of the metric it accounts for, from gradients — integrated gradients (the gradient
// summed along a straight path from a baseline of zero embeddings to the text) or gradient × input
// (one step). Decoders read the answer and wrong tokens of the view's boxes (empty boxes are filled
// with the model's own two likeliest next tokens first); encoders compare the sentence embedding
// with a reference text (the corrupted prompt unless changed). Under the strip: the legend, the
// metric at the text and at the baseline, and the completeness gap with what it means.
//
// State: every click asks anew and a reply for an earlier click is dropped; an edit of the prompt,
// the answers, the metric or the panel's settings dims the colours shown and says so (restoring
// the inputs undims them); a new pair clears the panel.

import type { ModelInfo, PatchMetric, SaliencyMethod, SaliencyResult, SaliencyToken } from '../../lib/api';
import type { SaliencyRequest } from '../../lib/api';
import { readableOn, signedColour } from '../../lib/colour';
import { h } from '../../lib/dom';
import { sentenceCase, tokenLabel, visibleToken } from '../../lib/format';
import { signedLegend } from '../../lib/legend';
import {
  gapLine,
  SALIENCY_METHOD_LABELS,
  SALIENCY_STEPS,
  saliencyCaption,
  saliencyLimit,
  saliencyNumber,
  saliencyRequest,
} from './gradients';
import { METRIC_LABELS } from './patch-grid';

/** What the view lends the panel: its prompt, answers and metric, and the server. */
export interface SaliencyPanelOptions {
  saliency(request: SaliencyRequest): Promise<SaliencyResult>;
  /** The clean prompt, the answer pair and the metric now in the view. */
  inputs(): { text: string; answer: string; wrong: string; metric: PatchMetric };
  /** Decoders: fills the empty answer boxes from the model's prediction; the pair, or why not. */
  fillAnswers(): Promise<{ answer: string; wrong: string } | string>;
  describeError(e: unknown): string;
}

export class SaliencyPanel {
  readonly el: HTMLElement;
  private intro = h('p', { class: 'muted small', id: 'saliency-intro' });
  private method: HTMLSelectElement;
  private steps: HTMLSelectElement;
  private stepsControl: HTMLElement;
  private reference = h('input', {
    id: 'saliency-reference',
    type: 'text',
    spellcheck: 'false',
    placeholder: 'the text to compare with',
  });
  private referenceControl: HTMLElement;
  private runButton: HTMLButtonElement;
  private status = h('p', { class: 'status', id: 'saliency-status', 'aria-live': 'polite' });
  private result = h('div', { class: 'saliency-result', id: 'saliency-result', hidden: true });
  private model: ModelInfo | null = null;
  /** Bumped by every click and clear: a reply for an older one is dropped. */
  private asked = 0;
  /** The request of the colours shown (JSON), to tell whether they still match the inputs. */
  private shownKey: string | null = null;

  constructor(private readonly options: SaliencyPanelOptions) {
    this.method = h(
      'select',
      { id: 'saliency-method', 'aria-label': 'saliency method' },
      ...(['integrated_gradients', 'grad_x_input'] as SaliencyMethod[]).map((m) =>
        h('option', { value: m }, SALIENCY_METHOD_LABELS[m]),
      ),
    );
    this.steps = h(
      'select',
      { id: 'saliency-steps', 'aria-label': 'integration steps' },
      ...SALIENCY_STEPS.map((n) => h('option', { value: n, selected: n === 50 ? true : null }, String(n))),
    );
    this.stepsControl = h('label', { class: 'control' }, h('span', {}, 'Steps'), this.steps);
    this.referenceControl = h(
      'label',
      { class: 'control saliency-reference', hidden: true },
      h('span', {}, 'Reference text (the embedding is compared with this one’s)'),
      this.reference,
    );
    this.method.addEventListener('change', () => {
      this.stepsControl.hidden = this.method.value !== 'integrated_gradients';
      this.check();
    });
    for (const el of [this.steps, this.reference]) el.addEventListener('input', () => this.check());
    this.runButton = h(
      'button',
      { type: 'button', class: 'primary', id: 'saliency-run', onclick: () => void this.run() },
      'Colour the tokens',
    );
    this.el = h(
      'section',
      { class: 'saliency', id: 'saliency', 'aria-labelledby': 'saliency-title' },
      h('h3', { id: 'saliency-title' }, 'Saliency: which tokens of the clean prompt drive the metric?'),
      this.intro,
      h(
        'div',
        { class: 'patch-controls' },
        h('label', { class: 'control' }, h('span', {}, 'Method'), this.method),
        this.stepsControl,
        this.referenceControl,
        this.runButton,
      ),
      this.status,
      this.result,
    );
  }

  setModel(model: ModelInfo): void {
    this.model = model;
    this.referenceControl.hidden = model.causal;
    this.intro.textContent = model.causal
      ? 'Each token gets a score from gradients: its share of the metric above (how much the model prefers the answer token to the wrong one at the last position). Integrated gradients walks from a baseline, every token’s embedding set to zero, to the text in small steps and adds the gradient up along the way, so the scores should add up to the metric’s change; gradient × input takes one step. Empty answer boxes are filled with the model’s own two likeliest next tokens.'
      : `Each token gets a score from gradients: its share of 1 − cos between the sentence embedding of the clean prompt and that of the reference text. Integrated gradients walks from a baseline, every token’s embedding set to zero, to the text in small steps and adds the gradient up along the way, so the scores should add up to the metric’s change; gradient × input takes one step.`;
    this.clear();
  }

  /** The reference text of an encoder (the view sets the corrupted prompt with each new pair). */
  setReference(text: string): void {
    this.reference.value = text;
  }

  /** Empties the panel; a reply on its way is dropped. */
  clear(): void {
    this.asked++;
    this.shownKey = null;
    this.result.hidden = true;
    this.result.replaceChildren();
    this.result.classList.remove('stale');
    this.el.removeAttribute('data-state');
    this.status.className = 'status';
    this.status.textContent = '';
  }

  /** Called on every edit of the view's inputs: dims the colours if they no longer match them. */
  check(): void {
    if (this.shownKey === null) return;
    const stale = this.currentKey() !== this.shownKey;
    this.result.classList.toggle('stale', stale);
    if (this.el.getAttribute('data-state') === 'running') return;
    this.el.setAttribute('data-state', stale ? 'stale' : 'ready');
    this.status.className = 'status';
    this.status.textContent = stale
      ? 'The prompt, the answers or the settings changed since these colours were computed: press “Colour the tokens” again.'
      : '';
  }

  private request(): SaliencyRequest {
    const i = this.options.inputs();
    return saliencyRequest(this.model!, {
      ...i,
      method: this.method.value as SaliencyMethod,
      steps: Number(this.steps.value),
      reference: this.reference.value,
    });
  }

  private currentKey(): string {
    return JSON.stringify(this.request());
  }

  private async run(): Promise<void> {
    const m = this.model;
    if (!m) return;
    const ask = ++this.asked;
    this.el.setAttribute('data-state', 'running');
    this.status.className = 'status';
    this.status.textContent = 'Computing saliency…';
    let filled = '';
    const i = this.options.inputs();
    if (m.causal && (i.answer === '' || i.wrong === '')) {
      const pair = await this.options.fillAnswers().catch((e: unknown) => this.options.describeError(e));
      if (ask !== this.asked) return;
      if (typeof pair === 'string') return this.fail(pair);
      filled = `The answer boxes were empty: they now hold the model’s two likeliest next tokens, “${visibleToken(pair.answer)}” and “${visibleToken(pair.wrong)}”.`;
    }
    const request = this.request();
    if (m.causal ? request.answer === '' || request.wrong === '' : request.reference === '')
      return this.fail(
        m.causal ? 'Write the answer and the wrong token above first.' : 'Write a reference text to compare with.',
      );
    try {
      const r = await this.options.saliency(request);
      if (ask !== this.asked) return;
      this.draw(r, filled);
      this.shownKey = JSON.stringify(request);
      this.el.setAttribute('data-state', 'ready');
      this.check();
    } catch (e) {
      if (ask !== this.asked) return;
      this.fail(this.options.describeError(e));
    }
  }

  private fail(message: string): void {
    this.el.setAttribute('data-state', 'error');
    this.status.className = 'status error';
    this.status.textContent = message;
  }

  private draw(r: SaliencyResult, filled: string): void {
    const limit = saliencyLimit(r.tokens);
    const metric = METRIC_LABELS[r.metric];
    const cost = `${r.backward_passes} backward ${r.backward_passes === 1 ? 'pass' : 'passes'} in ${r.seconds.wall.toFixed(1)} s`;
    const baseline =
      r.baseline_value !== undefined
        ? `, ${saliencyNumber(r.baseline_value)} at the baseline (every embedding zero)`
        : '';
    this.status.className = 'status';
    this.status.textContent = '';
    this.result.hidden = false;
    this.result.classList.remove('stale');
    this.result.setAttribute('data-method', r.method);
    this.result.replaceChildren(
      ...(filled ? [h('p', { class: 'status', id: 'saliency-filled' }, filled)] : []),
      h(
        'p',
        { id: 'saliency-summary' },
        `${sentenceCase(SALIENCY_METHOD_LABELS[r.method])}${r.steps ? ` (${r.steps} steps)` : ''} of the ${metric}: ${saliencyNumber(r.value)} at the text${baseline}; the scores add up to ${saliencyNumber(r.total)}. ${cost}.`,
      ),
      h(
        'div',
        { class: 'saliency-tokens', id: 'saliency-tokens', 'data-limit': limit },
        ...r.tokens.map((t) => this.token(t, limit)),
      ),
      h('div', { class: 'legend-row' }, signedLegend(limit, saliencyCaption(r.metric))),
      h('p', { class: 'saliency-gap', id: 'saliency-gap', 'data-gap': r.completeness_gap ?? null }, gapLine(r)),
    );
  }

  private token(t: SaliencyToken, limit: number): HTMLElement {
    const score = t.score ?? 0;
    const background = signedColour(score, limit);
    const shown = t.display ?? t.text;
    return h(
      'span',
      {
        class: `saliency-token${t.special ? ' special' : ''}`,
        'data-index': t.index,
        'data-score': t.score ?? null,
        title: `“${shown}” (position ${t.index}): score ${saliencyNumber(t.score)}`,
        'aria-label': `${shown}: score ${saliencyNumber(t.score)}`,
        style: `background: ${background}; color: ${readableOn(background)}`,
      },
      tokenLabel(shown, 16),
    );
  }
}
