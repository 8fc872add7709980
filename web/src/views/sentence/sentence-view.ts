// Choosing the text: example sentences to click, or any text typed in the box.

import { h, clear } from '../../lib/dom';
import { EXAMPLES } from './examples';
import type { GenerateResult } from '../../lib/api';
import { tokenLabel } from '../../lib/format';

export interface SentenceCallbacks {
  analyse(text: string): void;
  /** Causal models only: continue the text greedily by `maxNewTokens` tokens. */
  generate?(text: string, maxNewTokens: number): void;
  /** A generated step was chosen: `position` is its token index in the analysed text. */
  selectStep?(position: number): void;
}

/** Tokens one click of "Generate" appends (the server allows up to 32). */
export const GENERATE_TOKENS = 16;

export class SentenceView {
  readonly el: HTMLElement;
  private chips: HTMLElement;
  private input: HTMLTextAreaElement;
  private status: HTMLElement;
  private hint: HTMLElement;
  private steps: HTMLElement;
  private generation: GenerateResult | null = null;

  constructor(
    private readonly callbacks: SentenceCallbacks,
    maxTokens: number,
  ) {
    this.chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'example sentences' });
    for (const ex of EXAMPLES) {
      this.chips.appendChild(
        h('button', { class: 'chip', type: 'button', 'data-example': ex.label, title: ex.text, onclick: () => this.choose(ex.text) }, ex.label),
      );
    }
    this.input = h('textarea', {
      id: 'text-input',
      rows: 2,
      spellcheck: 'false',
      'aria-label': 'text to analyse',
      placeholder: 'Type any English text…',
    });
    this.input.addEventListener('keydown', (e) => {
      if (e.key === 'Enter' && (e.ctrlKey || e.metaKey || !e.shiftKey)) {
        e.preventDefault();
        this.submit();
      }
    });
    this.status = h('span', { class: 'status', id: 'run-status', 'aria-live': 'polite' });
    this.hint = h('p', { class: 'hint' });
    const button = h('button', { class: 'primary', type: 'button', id: 'analyse', onclick: () => this.submit() }, 'Analyse');
    const generate = callbacks.generate
      ? h('button', { type: 'button', id: 'generate', title: `append ${GENERATE_TOKENS} tokens chosen greedily by the model (KV cache)`, onclick: () => {
            const text = this.input.value.trim();
            if (text) callbacks.generate!(text, GENERATE_TOKENS);
          } }, `Generate ${GENERATE_TOKENS} tokens`)
      : null;
    this.steps = h('div', { class: 'generate-steps', id: 'generate-steps', hidden: true });
    this.el = h(
      'section',
      { class: 'panel sentence', 'aria-labelledby': 'sentence-title' },
      h('h2', { id: 'sentence-title' }, 'Example sentence'),
      this.chips,
      h('div', { class: 'text-row' }, this.input, button, ...(generate ? [generate] : [])),
      h('div', { class: 'text-meta' }, this.status, h('span', { class: 'muted' }, `Enter analyses · Shift+Enter for a new line · up to ${maxTokens} tokens`)),
      this.hint,
      this.steps,
    );
  }

  /** Keeps the steps of a generation; they are shown while its text is the analysed one. */
  setGeneration(g: GenerateResult): void {
    this.generation = g;
  }

  private renderSteps(text: string, selectedToken: number): void {
    const g = this.generation;
    clear(this.steps);
    this.steps.hidden = !g || g.text !== text || g.generated.length === 0;
    if (this.steps.hidden || !g) return;
    const slider = h('input', { type: 'range', id: 'step-slider', min: 0, max: g.generated.length - 1, step: 1, 'aria-label': 'generated step' }) as HTMLInputElement;
    const at = g.generated.findIndex((s) => s.position === selectedToken);
    slider.value = String(Math.max(0, at));
    const step = g.generated[Math.max(0, at)];
    slider.addEventListener('input', () => this.callbacks.selectStep?.(g.generated[Number(slider.value)].position));
    const why = g.stopped_at_eos ? ' (stopped at end-of-text)' : g.stopped_at_limit ? ' (stopped at the token limit)' : '';
    this.steps.append(
      h('p', {}, h('strong', {}, 'Generated: '), `${g.generated.length} tokens after the ${g.prompt_tokens}-token prompt, greedily, through the key/value cache${why}.`),
      h('label', { class: 'step-row' }, 'Step ', slider, h('span', { id: 'step-label' }, at >= 0 ? ` ${at + 1} of ${g.generated.length}: “${tokenLabel(step.text, 20)}” at position ${step.position}` : ` choose a step (1–${g.generated.length})`)),
      h('p', { class: 'muted' }, 'The step’s token is locked as the query in “Head lines” and decomposed through W_O below: its row is the attention the model computed when it produced the next token (in a causal model, the full text’s row t equals step t’s row).'),
      ...(g.retokenizes_same ? [] : [h('p', { class: 'error' }, 'This text encodes to different tokens than the ones generated, so the views show the re-encoded text.')]),
    );
  }

  private choose(text: string): void {
    this.input.value = text;
    this.submit();
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (text) this.callbacks.analyse(text);
  }

  /** Shows the analysed text and how it was split. */
  update(text: string, status: string, isError = false, selectedToken = -1): void {
    if (document.activeElement !== this.input) this.input.value = text;
    this.renderSteps(text, selectedToken);
    this.status.textContent = status;
    this.status.classList.toggle('error', isError);
    const ex = EXAMPLES.find((e) => e.text === text);
    for (const chip of this.chips.children) chip.setAttribute('aria-pressed', String(chip.getAttribute('data-example') === ex?.label));
    clear(this.hint);
    if (ex) this.hint.append(h('strong', {}, 'Look for: '), ex.hint);
  }
}
