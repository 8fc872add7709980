// One text field of the Patching view (a prompt, or an answer token) with the tokens the model
// reads in it, fetched as the user types (POST /api/tokenize, a few hundred ms after the last key).
// A reply for an older value is dropped, so the chips always show the text in the box.

import { ApiError, type TokenizeResult } from '../../lib/api';
import { h } from '../../lib/dom';
import { tokenLabel } from '../../lib/format';

/** Quiet time after the last key before the tokens are asked for. */
const TOKENIZE_DELAY_MS = 250;

export interface PromptBoxOptions {
  id: string;
  label: string;
  /** A prompt (a textarea, special tokens added as when it runs) or an answer (one line, bare). */
  kind: 'prompt' | 'answer';
  placeholder?: string;
  tokenize(text: string, special: boolean): Promise<TokenizeResult>;
  /** Called on every edit: the view marks its results out of date. */
  edited(): void;
  /** Called when the tokens of the text in the box arrive (or the box is emptied). */
  tokenized(): void;
}

export class PromptBox {
  readonly el: HTMLElement;
  readonly input: HTMLTextAreaElement | HTMLInputElement;
  private chips: HTMLElement;
  private timer: ReturnType<typeof setTimeout> | null = null;
  private asked = 0;
  /** The tokens of the text now in the box, once known. */
  tokens: TokenizeResult | null = null;

  constructor(private readonly o: PromptBoxOptions) {
    this.input =
      o.kind === 'prompt'
        ? h('textarea', { id: o.id, rows: 2, spellcheck: 'false', placeholder: o.placeholder ?? null })
        : h('input', { id: o.id, type: 'text', spellcheck: 'false', placeholder: o.placeholder ?? null });
    this.input.addEventListener('input', () => this.edited());
    this.chips = h('div', { class: 'chips token-chips patch-tokens', id: `${o.id}-tokens`, 'aria-live': 'polite' });
    this.el = h('div', { class: `prompt-box ${o.kind}` }, h('label', { for: o.id }, o.label), this.input, this.chips);
  }

  get value(): string {
    return this.input.value;
  }

  /** Sets the text (no edit event) and asks for its tokens at once. */
  set(text: string): void {
    this.input.value = text;
    this.tokens = null;
    void this.fetch();
  }

  private edited(): void {
    this.tokens = null;
    this.asked++; // a reply already on its way is for the old text
    this.o.edited();
    if (this.timer) clearTimeout(this.timer);
    this.timer = setTimeout(() => void this.fetch(), TOKENIZE_DELAY_MS);
  }

  private async fetch(): Promise<void> {
    const ask = ++this.asked;
    const text = this.input.value;
    if (text === '') {
      this.chips.replaceChildren();
      this.chips.removeAttribute('data-count');
      this.o.tokenized();
      return;
    }
    try {
      const t = await this.o.tokenize(text, this.o.kind === 'prompt');
      if (ask !== this.asked) return;
      this.tokens = t;
      this.drawTokens(t);
    } catch (e) {
      if (ask !== this.asked) return;
      this.chips.replaceChildren(h('span', { class: 'status error' }, e instanceof ApiError ? e.message : String(e)));
    }
    this.o.tokenized();
  }

  private drawTokens(t: TokenizeResult): void {
    this.chips.setAttribute('data-count', String(t.n_tokens));
    const answer = this.o.kind === 'answer';
    const note = answer
      ? t.n_tokens === 1
        ? h('span', { class: 'token-count ok' }, '1 token ✓')
        : h(
            'span',
            { class: 'token-count bad' },
            `${t.n_tokens} tokens: the metric compares one token, so pick a word the model writes as one (usually with its leading space)`,
          )
      : h('span', { class: 'token-count' }, `${t.n_tokens} tokens`);
    this.chips.replaceChildren(
      ...t.tokens.map((tok) =>
        h(
          'span',
          { class: `chip token${tok.special ? ' special' : ''}`, title: `id ${tok.id}: ${JSON.stringify(tok.text)}` },
          tokenLabel((answer && /^[Ġ▁ ]/.test(tok.text) ? '␣' : '') + (tok.display ?? tok.text), 16),
        ),
      ),
      note,
    );
  }
}
