// Choosing the text: example sentences to click, or any text typed in the box.

import { h, clear } from '../../lib/dom';
import { EXAMPLES } from './examples';
import type { GenerateResult } from '../../lib/api';
import { tokenLabel } from '../../lib/format';
import { entryShown } from '../../lib/tokens';

export interface SentenceCallbacks {
  analyse(text: string): void;
  /** Causal models only: continue the text greedily by `maxNewTokens` tokens. */
  generate?(text: string, maxNewTokens: number): void;
  /** A generated step was chosen: `position` is its token index in the analysed text. */
  selectStep?(position: number): void;
  /** How many tokens and words a typed (not yet analysed) text has: the counters follow the box. */
  count?(text: string): Promise<{ tokens: number; words: number }>;
  /** The text cut so that the model reads all of it (Truncate): one click, whatever the cause. */
  fit?(text: string): Promise<string>;
  /** The views show another text than the box: `why` in words, or null when they match again. */
  stale?(why: string | null): void;
}

/** Milliseconds of no typing before the counters ask the server for the typed text's tokens. */
const COUNT_DELAY_MS = 250;

/** Tokens one click of "Generate" appends (the server allows up to 32). */
export const GENERATE_TOKENS = 16;

/** Where the last generation is kept for this tab, so that a reload shows its steps again. */
export const GENERATION_KEY = 'headscope.generation';

function storedGeneration(): GenerateResult | null {
  try {
    const g = JSON.parse(sessionStorage.getItem(GENERATION_KEY) ?? 'null');
    return g && typeof g.text === 'string' && Array.isArray(g.generated) ? (g as GenerateResult) : null;
  } catch {
    return null;
  }
}

/** The part of `text` before byte offset `end` (UTF-8), as the server's token offsets count. */
export function textBeforeByte(text: string, end: number): string {
  return new TextDecoder().decode(new TextEncoder().encode(text).slice(0, Math.max(0, end)));
}

export class SentenceView {
  readonly el: HTMLElement;
  private chips: HTMLElement;
  private input: HTMLTextAreaElement;
  private status: HTMLElement;
  private hint: HTMLElement;
  private steps: HTMLElement;
  private generation: GenerateResult | null = storedGeneration();
  private buttons: HTMLButtonElement[];
  private notice: HTMLElement;
  /** The step slider of the current generation, kept across updates so that it keeps the focus
   *  while the arrow keys move through the steps. */
  private slider: HTMLInputElement | null = null;
  private stepLabel: HTMLElement | null = null;
  private stepsFor: GenerateResult | null = null;
  private wantFocus = false;
  /** The analysed text and its status line, to restore when the box holds that text again. */
  private analysed: { text: string; status: string; isError: boolean } | null = null;
  private countTimer: ReturnType<typeof setTimeout> | undefined;
  private maxTokens: number;

  constructor(
    private readonly callbacks: SentenceCallbacks,
    maxTokens: number,
  ) {
    this.maxTokens = maxTokens;
    this.chips = h('div', { class: 'chips', role: 'group', 'aria-label': 'example sentences' });
    for (const ex of EXAMPLES) {
      this.chips.appendChild(
        h(
          'button',
          {
            class: 'chip',
            type: 'button',
            'data-example': ex.label,
            title: ex.text,
            onclick: () => this.choose(ex.text),
          },
          ex.label,
        ),
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
    this.input.addEventListener('input', () => this.typed());
    this.status = h('span', { class: 'status', id: 'run-status', 'aria-live': 'polite' });
    this.hint = h('p', { class: 'hint' });
    const button = h(
      'button',
      { class: 'primary', type: 'button', id: 'analyse', onclick: () => this.submit() },
      'Analyse',
    );
    const generate = callbacks.generate
      ? h(
          'button',
          {
            type: 'button',
            id: 'generate',
            title: `append ${GENERATE_TOKENS} tokens chosen greedily by the model (KV cache)`,
            onclick: () => {
              const text = this.input.value.trim();
              if (text) callbacks.generate!(text, GENERATE_TOKENS);
              else this.showEmpty();
            },
          },
          `Generate ${GENERATE_TOKENS} tokens`,
        )
      : null;
    this.steps = h('div', { class: 'generate-steps', id: 'generate-steps', hidden: true });
    this.buttons = [button, ...(generate ? [generate] : [])];
    this.notice = h('div', { class: 'truncate-notice', id: 'truncate-notice', hidden: true });
    this.el = h(
      'section',
      { class: 'panel sentence', 'aria-labelledby': 'sentence-title' },
      h('h2', { id: 'sentence-title' }, 'Example sentence'),
      this.chips,
      h('div', { class: 'text-row' }, this.input, button, ...(generate ? [generate] : [])),
      h(
        'div',
        { class: 'text-meta' },
        this.status,
        h('span', { class: 'muted' }, `Enter analyses · Shift+Enter for a new line · up to ${maxTokens} tokens`),
      ),
      this.notice,
      this.hint,
      this.steps,
    );
  }

  /** Keeps the steps of a generation (also in sessionStorage, for a reload); they are shown while
   *  its text is the analysed one. */
  setGeneration(g: GenerateResult): void {
    this.generation = g;
    try {
      sessionStorage.setItem(GENERATION_KEY, JSON.stringify(g));
    } catch {
      // storage full or disabled: the steps last until a reload
    }
  }

  /** While the server computes: Analyse (and Generate) cannot be pressed again. */
  setBusy(busy: boolean): void {
    for (const b of this.buttons) b.disabled = busy;
    this.el.setAttribute('aria-busy', String(busy));
  }

  /** Puts the focus on the step slider, where ← → ↑ ↓ move through the steps (once the steps
   *  of the new generation are drawn). */
  focusSteps(): void {
    this.wantFocus = true;
  }

  /** The generation whose steps are shown for `text`, or null. */
  generationFor(text: string): GenerateResult | null {
    const g = this.generation;
    return g && g.text === text && g.generated.length > 0 ? g : null;
  }

  /** A text over the model's limit: what was analysed, and a button that cuts the text to it.
   *  keep: the analysed part of the text (null: no notice). */
  showTruncation(maxTokens: number, keep: string | null, why: string): void {
    clear(this.notice);
    this.notice.hidden = keep === null;
    if (keep === null) return;
    this.notice.append(
      h('span', {}, why),
      h(
        'button',
        {
          type: 'button',
          id: 'truncate',
          onclick: async () => {
            const fitted = this.callbacks.fit ? await this.callbacks.fit(keep) : keep;
            this.input.value = fitted;
            this.callbacks.analyse(fitted);
          },
        },
        `Truncate to ${maxTokens} tokens`,
      ),
    );
  }

  /** labels: how each token of the analysed text reads (decoded), by position. */
  private renderSteps(text: string, selectedToken: number, labels: string[]): void {
    const g = this.generationFor(text);
    this.steps.hidden = !g;
    if (!g) {
      this.stepsFor = null;
      return;
    }
    if (this.stepsFor !== g) {
      this.stepsFor = g;
      clear(this.steps);
      const slider = h('input', {
        type: 'range',
        id: 'step-slider',
        min: 0,
        max: g.generated.length - 1,
        step: 1,
        'aria-label': 'generated step (arrow keys move through the steps)',
      }) as HTMLInputElement;
      slider.addEventListener('input', () => this.callbacks.selectStep?.(g.generated[Number(slider.value)].position));
      this.slider = slider;
      this.stepLabel = h('span', { id: 'step-label' });
      const why = g.stopped_at_eos
        ? ' (stopped at end-of-text)'
        : g.stopped_at_limit
          ? ' (stopped at the token limit)'
          : '';
      this.steps.append(
        h(
          'p',
          {},
          h('strong', {}, 'Generated: '),
          `${g.generated.length} tokens after the ${g.prompt_tokens}-token prompt, greedily, through the key/value cache${why}.`,
        ),
        h('label', { class: 'step-row' }, 'Step ', slider, this.stepLabel),
        h(
          'p',
          { class: 'muted' },
          'Each step shows the attention row that produced its token: the query one position before it is locked in “Head lines” (generated tokens are marked ✦ there) and decomposed through W_O below. In a causal model the full text’s row t is exactly what the model computed at that step. With the slider focused, the arrow keys move through the steps.',
        ),
        ...(g.retokenizes_same
          ? []
          : [
              h(
                'p',
                { class: 'error' },
                'This text encodes to different tokens than the ones generated, so the views show the re-encoded text.',
              ),
            ]),
      );
    }
    // The selected token is the query that produced the step's token, one position before it.
    const at = g.generated.findIndex((st) => st.position === selectedToken + 1);
    const step = g.generated[Math.max(0, at)];
    if (document.activeElement !== this.slider || Number(this.slider!.value) !== Math.max(0, at))
      this.slider!.value = String(Math.max(0, at));
    if (this.wantFocus) {
      this.wantFocus = false;
      this.slider!.focus();
    }
    this.stepLabel!.textContent =
      at >= 0
        ? ` ${at + 1} of ${g.generated.length}: “${tokenLabel(labels[step.position] ?? entryShown(step.text), 20)}” at position ${step.position}, produced by the row of “${tokenLabel(labels[step.position - 1] ?? '?', 20)}” (position ${step.position - 1})`
        : ` choose a step (1–${g.generated.length})`;
  }

  private choose(text: string): void {
    this.input.value = text;
    this.submit();
  }

  private submit(): void {
    const text = this.input.value.trim();
    if (text) this.callbacks.analyse(text);
    else this.showEmpty();
  }

  /** An empty box: nothing to analyse, and the views dimmed, since they show the last text. */
  private showEmpty(): void {
    clearTimeout(this.countTimer);
    this.setStatus('The box is empty: type a text (or pick an example) and press Enter.', true);
    this.callbacks.stale?.('empty');
  }

  /** While typing: the "Look for" hint and the example buttons follow the box, and the counters
   *  count the typed text (after a short pause), saying that the views still show the last one. */
  private typed(): void {
    const text = this.input.value.trim();
    this.showHint(text);
    clearTimeout(this.countTimer);
    if (text === '') return this.showEmpty();
    if (this.analysed && text === this.analysed.text.trim()) {
      this.setStatus(this.analysed.status, this.analysed.isError);
      this.callbacks.stale?.(null);
      return;
    }
    this.callbacks.stale?.('typing');
    const count = this.callbacks.count;
    if (!count) return;
    this.countTimer = setTimeout(() => {
      count(text)
        .then(({ tokens, words }) => {
          // The box changed, or this text was analysed meanwhile: its own counts are shown.
          if (this.input.value.trim() !== text || this.analysed?.text.trim() === text) return;
          const over =
            tokens > this.maxTokens
              ? ` – over the ${this.maxTokens} the model reads at once, so only the beginning will be analysed`
              : '';
          this.setStatus(
            `${tokens} tokens · ${words} words typed${over}. Press Enter to analyse; the views below still show the last text.`,
            false,
          );
        })
        .catch((e: unknown) => {
          if (this.input.value.trim() === text && this.analysed?.text.trim() !== text)
            this.setStatus(`This text cannot be analysed as it is: ${(e as Error).message}`, true);
        });
    }, COUNT_DELAY_MS);
  }

  private setStatus(status: string, isError: boolean): void {
    this.status.textContent = status;
    this.status.classList.toggle('error', isError);
  }

  /** "Look for": the hint of the example the box holds, none for another text. */
  private showHint(text: string): void {
    const ex = EXAMPLES.find((e) => e.text === text);
    for (const chip of this.chips.children)
      chip.setAttribute('aria-pressed', String(chip.getAttribute('data-example') === ex?.label));
    clear(this.hint);
    if (ex) this.hint.append(h('strong', {}, 'Look for: '), ex.hint);
  }

  /** Shows the analysed text and how it was split; labels: each token as it reads (decoded). */
  update(text: string, status: string, isError = false, selectedToken = -1, labels: string[] = []): void {
    if (document.activeElement !== this.input) this.input.value = text;
    this.renderSteps(text, selectedToken, labels);
    this.analysed = { text, status, isError };
    clearTimeout(this.countTimer);
    this.setStatus(status, isError);
    this.showHint(this.input.value.trim());
  }
}
