// Choosing the text: example sentences to click, or any text typed in the box.

import { h, clear } from '../../lib/dom';
import { EXAMPLES } from './examples';

export interface SentenceCallbacks {
  analyse(text: string): void;
}

export class SentenceView {
  readonly el: HTMLElement;
  private chips: HTMLElement;
  private input: HTMLTextAreaElement;
  private status: HTMLElement;
  private hint: HTMLElement;

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
    this.el = h(
      'section',
      { class: 'panel sentence', 'aria-labelledby': 'sentence-title' },
      h('h2', { id: 'sentence-title' }, 'Example sentence'),
      this.chips,
      h('div', { class: 'text-row' }, this.input, button),
      h('div', { class: 'text-meta' }, this.status, h('span', { class: 'muted' }, `Enter analyses · Shift+Enter for a new line · up to ${maxTokens} tokens`)),
      this.hint,
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
  update(text: string, status: string, isError = false): void {
    if (document.activeElement !== this.input) this.input.value = text;
    this.status.textContent = status;
    this.status.classList.toggle('error', isError);
    const ex = EXAMPLES.find((e) => e.text === text);
    for (const chip of this.chips.children) chip.setAttribute('aria-pressed', String(chip.getAttribute('data-example') === ex?.label));
    clear(this.hint);
    if (ex) this.hint.append(h('strong', {}, 'Look for: '), ex.hint);
  }
}
